"""Pieces of the quiet-OS controls that need no device."""

from ssdbench.run import quiet


def test_cpulist():
    assert quiet.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}


def test_cool_down_without_a_sensor_says_so():
    result = quiet.cool_down({"temperature_source": None}, None, lambda: False)
    assert result == {
        "state": "unavailable",
        "reason": "cool-down: the drive's temperature cannot be read",
        "idled_s": 0.0,
    }

"""Pieces of the quiet-OS controls that need no device."""

from ssdbench.run import quiet


def test_cpulist():
    assert quiet.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}


def test_an_idle_without_a_sensor_idles_its_fixed_seconds_and_says_it_had_nothing_to_wait_for():
    result = quiet.cool_down({"temperature_source": None}, None, lambda: False, 1)
    assert result["state"] == "applied" and "temperature cannot be read" in result["value"]
    assert result["idled_s"] >= 1.0 and result["minimum_s"] == 1 and result["cooled"] is None

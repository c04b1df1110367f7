"""Pieces of the quiet-OS controls that need no device."""

from ssdbench.run import quiet


def test_cpulist():
    assert quiet.parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}


def test_an_idle_idles_its_fixed_seconds_and_a_stop_ends_it():
    result = quiet.idle(1, lambda: False)
    assert result["state"] == "applied" and result["idled_s"] >= 1.0 and result["minimum_s"] == 1
    stopped = quiet.idle(3600, lambda: True)
    assert stopped["idled_s"] < 1 and stopped["minimum_s"] == 3600

"""SNIA steady-state rule on series whose answer is known by construction."""

import random

import pytest

from ssdbench.run import steady


def per_second(round_averages, jitter=0.02, seed=7):
    """A once-a-second series whose 60 s rounds average exactly to the given values."""
    rng = random.Random(seed)
    series = []
    for avg in round_averages:
        noise = [rng.uniform(-jitter, jitter) * avg for _ in range(59)]
        series += [avg + n for n in noise] + [avg - sum(noise)]
    return series


def test_a_drive_that_settles_at_round_12():
    # Falls off the cliff, then flat from round 8 to the end: the window of rounds 8-12 passes,
    # every window ending later passes, and none ending earlier does.
    averages = [100_000, 80_000, 60_000, 40_000, 30_000, 20_000, 12_000] + [10_000] * 27
    values = per_second(averages)
    for end in range(5, 12):
        assert not steady.window_is_steady(steady.rounds(values)[end - 5 : end]), end
    found = steady.detect(values)
    assert found.reached and found.round == 12 and found.t_s == 720
    assert abs(found.window_average - 10_000) < 1e-6


# Fresh out of box at 50000 for 10 rounds, the write cliff in round 11, then a low level from round 12.
PLATEAU = [50_000] * 10 + [20_000]
LOW = [8_100, 7_900, 8_050, 7_950, 8_000, 8_120, 7_880, 8_030, 7_970, 8_000]


def test_an_early_plateau_is_not_steady_state():
    values = per_second(PLATEAU + LOW)
    avgs = steady.rounds(values)
    # The plateau passes the rule on its own; the first passing window would say round 5.
    assert steady.window_is_steady(avgs[0:5])
    found = steady.detect(values)
    assert found.reached and found.round == 16 and found.t_s == 960
    assert found.t_s >= 11 * 60  # not before the low level starts
    assert abs(found.window_average - sum(LOW[-5:]) / 5) < 1e-6


def test_a_drive_still_falling_at_the_end_is_not_steady():
    # Settles, then loses 5% a round over the last 8 rounds: the final window's line falls too far.
    averages = PLATEAU + LOW + [8_000 * 0.95**r for r in range(1, 9)]
    values = per_second(averages)
    assert steady.window_is_steady(steady.rounds(values)[11:16])
    found = steady.detect(values)
    assert not found.reached and found.round is None and found.t_s is None


def test_a_late_dip_moves_the_time_past_it():
    # Low level over rounds 12-31 with a dip in round 22: windows ending at rounds 22-26 hold it.
    low = [8_000] * 20
    low[10] = 5_000
    values = per_second(PLATEAU + low)
    avgs = steady.rounds(values)
    assert steady.window_is_steady(avgs[16:21])  # the window ending at round 21, before the dip
    for end in range(22, 27):
        assert not steady.window_is_steady(avgs[end - 5 : end]), end
    found = steady.detect(values)
    assert found.reached and found.round == 27 and found.t_s == 27 * 60


def test_a_drive_that_never_settles():
    # Keeps losing 4% a round: every window's line falls by more than 10% of its average.
    averages = [50_000 * 0.96**r for r in range(34)]
    found = steady.detect(per_second(averages))
    assert not found.reached and found.round is None


def test_range_alone_can_refuse_a_window():
    # Flat slope but a spike: range 30% of the average.
    window = [10_000, 10_000, 13_000, 10_000, 10_000]
    assert abs(steady.slope(window)) < 1e-9
    assert not steady.window_is_steady(window)


def test_partial_last_round_is_left_out():
    assert steady.rounds([1.0] * 150) == [1.0, 1.0]


def test_windows_are_judged_from_the_first_round():
    # Flat from the start: the first window, rounds 1-5, already passes, and so does every later one.
    found = steady.detect(per_second([10_000] * 8))
    assert found.reached and found.round == 5 and found.t_s == 300
    assert found.rounds == 8 and found.window == (4, 8)


def test_fewer_rounds_than_a_window_is_not_reached_and_has_no_window():
    found = steady.detect(per_second([10_000] * 4) + [10_000.0] * 59)  # 4 whole rounds and a partial one
    assert not found.reached and found.rounds == 4 and found.window is None and found.window_average is None


def test_the_final_windows_range_and_slope_are_kept_for_the_reason():
    # The final window, rounds 3-7, holds a 30% spike: its range fails; its line is flat.
    averages = [10_000, 10_000, 10_000, 10_000, 13_000, 10_000, 10_000]
    found = steady.detect(per_second(averages, jitter=0))
    assert not found.reached and found.window == (3, 7)
    assert abs(found.range_ratio - 3_000 / 10_600) < 1e-9 and found.excursion_ratio < 1e-9
    assert abs(found.window_average - 10_600) < 1e-6


def test_a_drive_declining_slowly_passes_pts_limits_but_not_the_rule():
    # Settled, then 2.4% less each round for the last 7: PTS's range and slope excursion pass the final window
    # (9.6% and 9.5%), but its line falls 2.4% a round with next to no scatter about it: a decline.
    averages = PLATEAU + LOW + [8_000 * 0.976**r for r in range(1, 8)]
    found = steady.detect(per_second(averages))
    assert found.range_ratio <= steady.MAX_RANGE and found.excursion_ratio <= steady.MAX_SLOPE_EXCURSION
    assert found.declining and not found.reached and found.slope_ratio == pytest.approx(-0.024, abs=0.001)


def test_a_short_last_round_or_a_rise_is_no_decline():
    # One round 10% short at the window's end (a busy host's second 20% short in a 2 s round): its line falls
    # 2% a round, but the scatter explains it (t = -1.7). A drive still recovering rises: never a decline.
    assert steady.window_is_steady([1000, 1000, 1000, 1000, 900]) and not steady.declines([1000] * 4 + [900])
    assert steady.window_is_steady([900, 920, 940, 960, 980])
    assert not steady.window_is_steady([1000, 985, 970, 955, 940])  # 1.5% a round, steadily: a decline

"""SNIA steady-state rule on series whose answer is known by construction."""

import random

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
    # Falls off the cliff, then flat from round 8: the window of rounds 8-12 is the first steady one.
    averages = [100_000, 80_000, 60_000, 40_000, 30_000, 20_000, 12_000] + [10_000] * 27
    values = per_second(averages)
    for end in range(5, 12):
        assert not steady.window_is_steady(steady.rounds(values)[end - 5 : end]), end
    found = steady.detect(values)
    assert found.reached and found.round == 12 and found.t_s == 720
    assert abs(found.window_average - 10_000) < 1e-6


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

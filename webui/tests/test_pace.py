"""The live ETA learns the drive's pace from the run's own steps (issue 45): smoke's real plan, each step's time as
the runner records it as the step ends."""

import pytest

from ssdbench.run import pace, plan
from ssdbench.suites import locked


@pytest.fixture
def steps():
    return plan.compile_plan(locked.load("smoke"), 2**30)


def test_each_step_has_the_pace_its_time_follows(steps):
    paces = {step.id: pace.pace(step) for step in steps}
    assert paces["purge"] == paces["trim"] == "command"
    assert paces["seq-fill"] == paces["sweep-clean"] == paces["trace"] == "sized"
    assert paces["seq-read-128k"] == paces["cdm"] == paces["consistency"] == paces["burst"] == "timed"


def test_a_drive_slower_than_the_reference_is_foreseen_slower_over_its_size_bound_steps_only(steps):
    """A drive three times slower than the suite's rates over its size-bound steps, a purge ten times longer than
    foreseen, and a host that starts fio's jobs 10% faster: once the fill has ended, the sweeps and the trace are
    foreseen three times longer, the trim ten times, every timed step 10% shorter."""
    by_id = {step.id: step for step in steps}
    factors = {"sized": 3.0, "command": 10.0, "timed": 0.9}
    truth = {step.index: step.estimate_s * factors[pace.pace(step)] for step in steps}
    learned = pace.Pace(steps)
    assert learned.left(0, 0.0) == pytest.approx(sum(step.estimate_s for step in steps))
    fill = by_id["seq-fill"].index
    for step in steps[: fill + 2]:  # the purge, the fill and one timed step have ended
        learned.took[step.index] = truth[step.index]
    left = learned.left(fill + 2, 0.0)
    assert left == pytest.approx(sum(truth[step.index] for step in steps[fill + 2 :]))
    # what the plan alone foresaw: the estimates left, far from the time the run will take
    foreseen = sum(step.estimate_s for step in steps[fill + 2 :])
    assert abs(foreseen - left) / left > 0.2
    # half of a step done: half of its foreseen time left, at its pace
    half = learned.left(by_id["sweep-clean"].index, 0.5)
    after = sum(truth[step.index] for step in steps[by_id["sweep-clean"].index + 1 :])
    assert half == pytest.approx(truth[by_id["sweep-clean"].index] / 2 + after)

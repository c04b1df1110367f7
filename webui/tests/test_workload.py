"""The workload hash at run start: a trace whose recipe the manifest records is not generated again, and
one whose recipe changed is."""

import pytest

from ssdbench.errors import SsdbenchError
from ssdbench.run import workload
from ssdbench.suites import locked, trace_generator, trace_profiles


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Nothing computed in this process yet, as at the start of `ssdbench run`."""
    monkeypatch.setattr(workload, "_computed", {})
    monkeypatch.setattr(workload, "_generated", {})


def test_run_start_takes_a_recorded_traces_digest_without_generating_it(monkeypatch):
    def never(*args, **kw):
        raise AssertionError("the trace was generated")

    monkeypatch.setattr(trace_generator, "generate", never)
    for name in ("standard", "full"):
        s = workload.verified(locked.load(name))
        assert s.locked and s.workload_sha256 == locked.manifest()[name]["workload_sha256"]
        assert s.traces == {step: t["sha256"] for step, t in locked.locked_traces(name).items()}
        assert set(s.traces) == {"trace-heavy", "trace-light"}


def test_a_trace_whose_recipe_is_not_the_recorded_one_is_generated_and_hashed(monkeypatch):
    # A record for another recipe is not trusted: the trace is generated, and its true digest matches the lock.
    recorded = {"trace": {"recipe_sha256": "0" * 64, "sha256": "f" * 64}}
    monkeypatch.setattr(locked, "locked_traces", lambda name: recorded)
    s = workload.verified(locked.load("smoke"))
    assert s.locked and s.traces["trace"] == locked.manifest()["smoke"]["traces"]["trace"]["sha256"]


def test_a_changed_profile_changes_the_recipe_and_the_workload(monkeypatch):
    monkeypatch.setitem(trace_profiles.PROFILES["smoke"], "runs", {"exponent": 3, "longest": 64})
    with pytest.raises(SsdbenchError, match="workload hash .* differs from the locked"):
        workload.verified(locked.load("smoke"))


def test_the_manifest_records_each_trace_with_its_recipe():
    for name in locked.names():
        s = locked.load(name)
        recorded = locked.locked_traces(name)
        assert set(recorded) == {step["id"] for step in s.steps if step["kind"] == "trace"}
        for step in s.steps:
            if step["kind"] == "trace":
                recipe = trace_generator.recipe_sha256(step["profile"], step["seed"])
                assert recorded[step["id"]]["recipe_sha256"] == recipe

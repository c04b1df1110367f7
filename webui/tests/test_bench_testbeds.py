"""make bench's testbeds bench keeps working: its short mode (about 100 s), in a file of its own so that make test
can place it in either lane (Makefile's LATE_TESTS) apart from tests/test_bench.py's other short modes."""

from conftest import needs_root
from test_bench import short_bench


@needs_root()
def test_the_testbeds_bench_runs():
    """Its short mode: the figures on a free host twice, a slow one and a busy one. A slow host (30% of a CPU)
    is flagged whatever else the machine runs, and no figure may differ silently, nor for its data's cost with only
    the run-wide flags: the bench exits non-zero on either (short_bench asserts it exits 0)."""
    result = short_bench("bench_testbeds.py")
    assert result["ok"] and result["flagged"]["b: slow"] > 0
    assert result["silent"] == 0 and result["run_wide_only"] == 0

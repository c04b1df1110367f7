"""What the drive gets: each data kind's writes, as the shipped suites' plans write them, run by real fio on a
loop device and read back with O_DIRECT (methodology, "incompressible data" and "compressible data").

The unit checked is the 4 KiB block, the unit a drive maps: a drive's compressor is taken to work on what one
write brings, with no dictionary across LBAs, so what a block loses on its own is what it could take. A
block's ratio is what zstd -19 or xz -9 (LZMA2) makes of it on its own, less what each adds to an empty input.
Across blocks the compressible data repeats (the same 330 random bytes in every block: a whole sample compresses
to under 2%); that is not checked, and the methodology says so.
- incompressible: the blocks, compressed one by one, shrink by less than 1% in all (fio's random bytes: zstd
  takes more than 1% off one block in eight, more than 5% off one in eighty, and 0.4% off the sample);
- compressible: the blocks shrink to 10% (8 to 12%) in all, and none to more than 15%;
- both: no two 4 KiB blocks written are alike.
The checks fail on data that breaks that promise (test_the_checks_catch_data_that_breaks_the_promise).
"""

import lzma
import mmap
import os
import subprocess

import pytest
from conftest import needs_root

from ssdbench.run import plan, playback, runner, workload
from ssdbench.suites import locked

SIZE = 32 * 1024 * 1024  # written, then read back whole: 8192 blocks of 4 KiB
BLOCK = 4096
SAMPLE = 8  # every 8th block is compressed: 1024 blocks
INCOMPRESSIBLE_MIN = 0.99
COMPRESSIBLE = (0.08, 0.12)  # 90% compressible: 10% of the size, give or take 2 points
COMPRESSIBLE_BLOCK_MAX = 0.15
# xz -9 with a 64 KiB dictionary, which holds any one block (-9's own 64 MiB takes 80 ms a call to set up)
LZMA2 = [{"id": lzma.FILTER_LZMA2, "preset": 9, "dict_size": 64 * 1024}]


def shipped_writes():
    """(id, suite, step spec, job name, options) of one job for each distinct fio step that writes data in
    the shipped suites' plans: one per data kind, rw, bs, queue depth and read mix."""
    out, seen = [], set()
    for name in locked.names():
        suite = locked.load(name)
        for step in plan.compile_plan(suite, workload.REFERENCE_CAPACITY):
            if step.kind != "fio" or step.spec["data"] == "n/a":
                continue
            job_name, opts = step.jobs[0]
            key = (step.spec["data"], opts["rw"], opts["bs"], opts["iodepth"], opts.get("rwmixread"))
            if key not in seen:
                seen.add(key)
                out.append((f"{name}/{step.id}", suite, step.spec, job_name, opts))
    return out


WRITES = shipped_writes()


def writes_of(kind):
    return [pytest.param(*w[1:], id=w[0]) for w in WRITES if w[2]["data"] == kind]


def on_loop_device(opts):
    """A job's options with its span the first SIZE bytes, every block once (fio's random map), and no time
    limit or logs: what it writes is as the plan has it."""
    timed = ("runtime", "time_based")
    keep = {k: v for k, v in opts.items() if not k.startswith(("write_", "log_")) and k not in timed}
    return {**keep, "offset": 0, "size": SIZE, "norandommap": 0}


def write(dev, tmp_path, suite, spec, job_name, opts):
    """Run the job as the plan renders it, on the device, with real fio."""
    job = tmp_path / "job.fio"
    job.write_text(plan.job_file(suite, spec, [(job_name, on_loop_device(opts))]))
    subprocess.run(
        ["fio", "--output-format=json", "--output=/dev/null", str(job)],
        cwd=tmp_path,
        env=dict(os.environ, SSDBENCH_DUT=dev),
        check=True,
    )


def read_back(dev):
    """The first SIZE bytes of the device in 4 KiB blocks, read past the page cache (O_DIRECT)."""
    buf = mmap.mmap(-1, 1024 * 1024)  # page aligned, as O_DIRECT needs
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    blocks = []
    try:
        for at in range(0, SIZE, len(buf)):
            assert os.preadv(fd, [buf], at) == len(buf)
            data = bytes(buf)
            blocks += [data[i : i + BLOCK] for i in range(0, len(data), BLOCK)]
    finally:
        os.close(fd)
    return blocks


def zstd_sizes(blocks, tmp_path):
    """What zstd -19 makes of each block on its own, less what it makes of an empty input."""
    folder = tmp_path / f"zstd{len(list(tmp_path.glob('zstd*')))}"
    folder.mkdir()
    names = [str(folder / f"{i:05d}") for i in range(len(blocks))] + [str(folder / "empty")]
    for path, data in zip(names, [*blocks, b""]):
        with open(path, "wb") as f:
            f.write(data)
    subprocess.run(["zstd", "-q", "-19", "--no-check", "--", *names], check=True)
    sizes = [os.path.getsize(p + ".zst") for p in names]
    return [s - sizes[-1] for s in sizes[:-1]]


def xz_sizes(blocks):
    """What xz's LZMA2 (-9, no container) makes of each block on its own, less what it makes of nothing."""
    empty = len(lzma.compress(b"", format=lzma.FORMAT_RAW, filters=LZMA2))
    return [len(lzma.compress(b, format=lzma.FORMAT_RAW, filters=LZMA2)) - empty for b in blocks]


def ratios(blocks, tmp_path):
    """{compressor: (the sample's compressed bytes over its bytes, the largest block's ratio)}."""
    sample = blocks[::SAMPLE]
    out = {}
    for name, sizes in (("zstd", zstd_sizes(sample, tmp_path)), ("xz", xz_sizes(sample))):
        out[name] = (sum(sizes) / (BLOCK * len(sample)), max(sizes) / BLOCK)
    return out


def written(blocks):
    """The blocks that a write reached: a fresh loop device reads zeros elsewhere."""
    return [b for b in blocks if b.count(0) != BLOCK]


def duplicates(blocks):
    return len(blocks) - len(set(blocks))


def incompressible_problems(blocks, tmp_path):
    found = [f"{duplicates(blocks)} duplicate 4 KiB blocks"] if duplicates(blocks) else []
    for name, (ratio, _) in ratios(blocks, tmp_path).items():
        if ratio < INCOMPRESSIBLE_MIN:
            found.append(f"{name} shrinks the blocks to {ratio:.3f} of their size")
    return found


def compressible_problems(blocks, tmp_path):
    found = [f"{duplicates(blocks)} duplicate 4 KiB blocks"] if duplicates(blocks) else []
    low, high = COMPRESSIBLE
    for name, (ratio, largest) in ratios(blocks, tmp_path).items():
        if not low <= ratio <= high:
            found.append(f"{name} shrinks the blocks to {ratio:.3f} of their size, not {low} to {high}")
        if largest > COMPRESSIBLE_BLOCK_MAX:
            found.append(f"{name} leaves a block at {largest:.3f} of its size")
    return found


def test_these_tests_run_on_the_fio_that_makes_the_suites_data_off_the_clock():
    # make test puts make fio's first on PATH: the image's fio, with scramble_buffers=hash
    assert runner.fio_data() is plan.HASHED, "run make fio and put build/fio/bin first on PATH"


def test_these_tests_run_both_data_kinds_and_a_job_that_also_reads_as_the_shipped_suites_write_them():
    kinds = {w[2]["data"] for w in WRITES}
    assert kinds == {"incompressible", "compressible"}
    # the read-and-write job (OLTP) among them, whose reads share its buffers
    assert any(plan.mixes(w[4]) for w in WRITES)


def written_by(loopdev, tmp_path, suite, spec, job_name, opts):
    """The 4 KiB blocks that the job wrote to a fresh 64 MiB loop device, read back."""
    dev, _ = loopdev(size="64M")
    write(dev, tmp_path, suite, spec, job_name, opts)
    return written(read_back(dev))


@needs_root()
@pytest.mark.parametrize("suite, spec, job_name, opts", writes_of("incompressible"))
def test_incompressible_writes_do_not_shrink_under_zstd_or_xz_and_no_two_4k_blocks_are_alike(
    loopdev, tmp_path, suite, spec, job_name, opts
):
    blocks = written_by(loopdev, tmp_path, suite, spec, job_name, opts)
    # a job that also reads writes only its share; the others every block
    assert len(blocks) >= SIZE // BLOCK * (0.2 if plan.mixes(opts) else 1)
    assert incompressible_problems(blocks, tmp_path) == []


@needs_root()
@pytest.mark.parametrize("suite, spec, job_name, opts", writes_of("compressible"))
def test_compressible_writes_shrink_to_10_percent_under_zstd_and_xz_and_no_two_4k_blocks_are_alike(
    loopdev, tmp_path, suite, spec, job_name, opts
):
    blocks = written_by(loopdev, tmp_path, suite, spec, job_name, opts)
    assert len(blocks) == SIZE // BLOCK
    assert compressible_problems(blocks, tmp_path) == []


def oltp(data):
    """The shipped read-and-write step (OLTP, 70% reads), with `data` as its data kind."""
    suite, spec, job_name, opts = next((w[1], w[2], w[3], w[4]) for w in WRITES if plan.mixes(w[4]))
    spec = {**spec, "data": data}
    # without the data options it has, whose order matters (buffer_pattern turns scrambling off)
    data_keys = {k for table in (plan.DATA_OPTIONS, plan.STOCK.mixed) for options in table.values() for k in options}
    plain = {k: v for k, v in opts.items() if k not in data_keys}
    return suite, spec, job_name, {**plain, **plan.HASHED.options(spec)}


@needs_root()
def test_a_job_that_also_reads_writes_compressible_data_from_buffers_of_its_own_not_what_its_reads_brought_in(
    loopdev, tmp_path
):
    suite, spec, job_name, opts = oltp("compressible")
    assert opts["scramble_buffers"] == "hash" and opts["refill_buffers"] == 0  # made once, before the clock
    dev, _ = loopdev(size="64M")  # reads zeros where nothing was written
    write(dev, tmp_path, suite, spec, job_name, opts)
    assert compressible_problems(written(read_back(dev)), tmp_path) == []
    # With fio's plain stamps its reads and writes share buffers: the writes send the zeros the reads brought in
    dev, _ = loopdev(size="64M", name="once.img")
    write(dev, tmp_path, suite, spec, job_name, {**opts, "scramble_buffers": 1})
    assert any("shrinks the blocks to" in p for p in compressible_problems(written(read_back(dev)), tmp_path))
    # so a stock fio makes such a job's compressible data afresh for every write
    assert plan.STOCK.options(spec) == plan.STOCK_MIXED_COMPRESSIBLE


BROKEN = {
    # every write the same buffer of zeros, with fio's stamps
    "zeros": ({"zero_buffers": 1, "scramble_buffers": 1}, "incompressible", "shrinks the blocks to"),
    # random bytes made once, stamped by fio for every write: the old stamps add up to 80 bytes of every 512
    "random-once-scrambled": ({"refill_buffers": 0, "scramble_buffers": 1}, "incompressible", "shrinks the blocks"),
    # random bytes made once, never stamped: every write the same
    "random-once": ({"refill_buffers": 0, "scramble_buffers": 0}, "incompressible", "duplicate 4 KiB blocks"),
    # the compressible pattern without fio's stamps: every write the same
    "pattern-unscrambled": (
        {**plan.DATA_OPTIONS["compressible"], "scramble_buffers": 0},
        "compressible",
        "duplicate 4 KiB blocks",
    ),
}


@needs_root()
@pytest.mark.parametrize("broken", BROKEN)
def test_the_checks_catch_data_that_breaks_the_promise(loopdev, tmp_path, broken):
    data, kind, problem = BROKEN[broken]
    suite, spec, job_name, opts = next((w[1], w[2], w[3], w[4]) for w in WRITES if w[2]["data"] == kind)
    plain = {k: v for k, v in opts.items() if k not in plan.DATA_OPTIONS[kind]}
    dev, _ = loopdev(size="64M")
    write(dev, tmp_path, suite, spec, job_name, {**plain, **data})
    check = incompressible_problems if kind == "incompressible" else compressible_problems
    assert any(problem in p for p in check(written(read_back(dev)), tmp_path))


@needs_root()
def test_a_replay_that_reads_zeros_and_rewrites_its_blocks_still_writes_incompressible_unique_blocks(loopdev, tmp_path):
    """A trace's replay job as playback renders it (disable_lat: fio keeps no start time per IO, so the stamps
    cannot count on the time) at QD1, one buffer for its reads and writes: each 128 KiB write over the first
    4 MiB twice, each after a read of the never-written second half (zeros), and 4 KiB writes between."""
    dev, _ = loopdev(size="64M")
    half, big = SIZE // 2, 128 * 1024
    ios = []
    for _ in range(2):
        for at in range(0, 4 * 1024 * 1024, big):
            ios += [("R", half + at, big), ("W", at, big), ("W", 4 * 1024 * 1024 + at // 32, BLOCK)]
    name, options = playback.replay_job(0, 1, last=True)  # no job after it: no FIFO to hand over to
    playback._write_replay(tmp_path / f"{name}.replay", ios)
    job = tmp_path / "replay.fio"
    job.write_text(
        f"[global]\nfilename=${{{plan.DUT_VAR}}}\n[{name}]\n" + "".join(f"{k}={v}\n" for k, v in options.items())
    )
    subprocess.run(
        ["fio", "--output-format=json", "--output=/dev/null", str(job)],
        cwd=tmp_path,
        env=dict(os.environ, SSDBENCH_DUT=dev),
        check=True,
    )
    blocks = written(read_back(dev))
    assert len(blocks) == (4 * 1024 * 1024 + 32 * BLOCK) // BLOCK
    assert incompressible_problems(blocks, tmp_path) == []


def test_a_stock_fio_falls_back_to_the_data_of_before_and_the_run_says_why(tmp_path, monkeypatch):
    """Debian's own fio (/usr/bin/fio, no scramble_buffers=hash): fresh random bytes for every write."""
    (tmp_path / "fio").symlink_to("/usr/bin/fio")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    data = runner.fio_data()
    assert data is plan.STOCK and "scramble_buffers=hash" in data.record()["why"]
    steps = plan.compile_plan(locked.load("smoke"), workload.REFERENCE_CAPACITY, data=data)
    files = "".join(step.job_file or "" for step in steps)
    assert "scramble_buffers=hash" not in files and "refill_buffers=1" in files
    assert all(step.data is plan.STOCK for step in steps)

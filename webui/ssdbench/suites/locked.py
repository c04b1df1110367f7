"""The locked suites: load the files, check them against the shipped hash manifest, validate.

A suite's hash is the sha256 of its canonical form (the parsed TOML as sorted,
compact JSON), so comments and layout may change but no value can. The manifest
also locks each suite's workload hash, which run/workload.py computes over
everything the suite makes a drive do (job files, data pattern, traces).
"""

import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

from ..errors import SsdbenchError
from . import trace_profiles

FORMAT = 1
RW_MODES = ("read", "write", "randread", "randwrite", "rw", "randrw", "trim", "randtrim")
DATA_KINDS = ("incompressible", "compressible", "n/a")
SUITE_KEYS = {
    *("format", "name", "version", "title", "comparable", "fio", "estimate", "repeat", "idle", "steps"),
    "description",
}
# [idle] seconds: the fixed idle before every step with cooldown = true, and between the runs of a repeat set
# (run/quiet.idle; the methodology, "Idle between steps").
MAX_IDLE_S = 3600
# Repeatability (`ssdbench repeat`): a headline figure whose coefficient of variation across the runs of a repeat
# set is above its threshold, in percent, is flagged. A suite states its own in [repeat]; these hold where it does
# not (see the methodology, "Repeatability").
REPEAT_DEFAULTS = {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}
# cooldown: whether the drive idles the suite's [idle] seconds before the step (see the methodology).
COMMON_KEYS = {"id", "kind", "title", "note", "cooldown"}
JOB_KEYS = {"rw", "bs", "iodepth", "numjobs", "span", "runtime", "data", "rwmixread"}
# The keys each kind of step takes besides COMMON_KEYS; see the methodology section in each comment.
STEP_KEYS = {
    "purge": set(),  # 1: strongest method the drive supports
    "trim": set(),  # 6.4: timed whole-drive TRIM
    # 2, 3, 5, 9: one fio job; runtime_per scales it to the span; randommap writes each block of it once; loops
    # writes the span over that many times (5: the preconditioning, twice)
    "fio": JOB_KEYS | {"steady", "runtime_per", "randommap", "loops"},
    "matrix": JOB_KEYS | {"jobs", "axes", "curve"},  # 4, 9: several fio jobs, one after another
    "sweep": {"zones", "zone_size", "bs", "baseline", "passes"},  # 6.1: HDTach-style zone sweep
    "trace": {"profile", "seed", "user_trace"},  # 7: Storage Bench playback, always the whole trace
    "burst": {"span", "background", "foreground"},  # 8: Mixed Burst
}
STEP_KINDS = tuple(STEP_KEYS)
# A tester's imported trace (suites/user_traces): its name and sha256, and what the plan needs of it.
USER_TRACE_KEYS = {"name", "sha256", "label", "reads", "writes", "bytes_read", "bytes_written", "segments"}
BURST_KEYS = {
    # iodepth: writes outstanding at once; seed: draws the random offsets of its writes
    "background": {"bs", "iodepth", "burst", "every_s", "seed"},
    "foreground": {"bs", "iodepth", "burst", "bursts", "idle_s"},
}
MAX_BACKGROUND_QD = 32

_UNITS = {
    "": 1,
    "k": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tib": 1024**4,
}


@dataclass(frozen=True)
class Suite:
    name: str
    data: dict
    sha256: str
    locked: bool  # True when the hash matches the shipped manifest (and the workload's, once checked)
    workload_sha256: str | None = None  # set by run/workload.py when a run is about to use the suite
    traces: dict | None = None  # step id -> the sha256 of the trace it plays, set with workload_sha256

    @property
    def steps(self):
        return self.data["steps"]


def summary(s):
    """A suite's name, version, title, hash, lock state, comparability and step count."""
    return {
        "name": s.name,
        "version": s.data["version"],
        "title": s.data["title"],
        "sha256": s.sha256,
        "locked": s.locked,
        "comparable": s.data.get("comparable", True),
        "steps": len(s.steps),
        "repeat": repeat_thresholds(s.data),
    }


def idle_seconds(data):
    """The suite's fixed idle, in seconds (its [idle] seconds)."""
    return data["idle"]["seconds"]


def repeat_thresholds(data):
    """The CoV thresholds (percent) of a suite's repeat sets: its own [repeat], else the defaults."""
    return {**REPEAT_DEFAULTS, **data.get("repeat", {})}


def canonical(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def suite_hash(data):
    return hashlib.sha256(canonical(data)).hexdigest()


def parse_size(text):
    """Bytes from '4k', '128KiB', '8GiB' or a plain integer; binary units, as fio's default kb_base."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise SsdbenchError(f"not a size: {text!r} (use bytes, or k/KiB, m/MiB, g/GiB, t/TiB)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _suite_dir():
    return resources.files("ssdbench") / "suites"


def manifest_path():
    return _suite_dir() / "MANIFEST.json"


def manifest():
    """{suite name: {"suite_sha256": ..., "workload_sha256": ..., "traces": ...}}, as shipped."""
    return json.loads(manifest_path().read_text())


def locked_hashes(name):
    """The suite's locked (suite hash, workload hash); (None, None) for a suite that is not shipped."""
    entry = manifest().get(name, {})
    return entry.get("suite_sha256"), entry.get("workload_sha256")


def locked_traces(name):
    """{step id: {"recipe_sha256", "sha256"}}: the digest of each trace the shipped suite plays, with the
    recipe that makes it (see run/workload.py)."""
    return manifest().get(name, {}).get("traces", {})


def names():
    return sorted(manifest())


def _parse(text, origin):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SsdbenchError(f"suite {origin} is not valid TOML: {exc}") from exc
    validate(data, origin)
    return data


def load(name=None, path=None, allow_non_standard=False):
    """A suite by its shipped name, or from a file; refused if its hash is not the locked one."""
    if path is not None:
        try:
            text = open(path, encoding="utf-8").read()
        except OSError as exc:
            raise SsdbenchError(f"cannot read suite file {path}: {exc.strerror}") from exc
        origin = str(path)
    else:
        if name not in manifest():
            raise SsdbenchError(f"no suite named {name!r}; the suites are: {', '.join(names())}")
        text = (_suite_dir() / f"{name}.toml").read_text(encoding="utf-8")
        origin = f"{name}.toml"
    data = _parse(text, origin)
    digest = suite_hash(data)
    expected = locked_hashes(data["name"])[0]
    locked = digest == expected
    if not locked and not allow_non_standard:
        if expected is None:
            why = f"{data['name']!r} is not one of the locked suites ({', '.join(names())})"
        else:
            why = (
                f"its hash {digest[:16]}... differs from the locked hash {expected[:16]}... "
                f"of suite {data['name']!r}: the file was changed"
            )
        raise SsdbenchError(
            f"suite {origin} refused: {why}. Results from it would not be comparable; "
            "pass --non-standard to run it anyway, marked non-standard."
        )
    return Suite(data["name"], data, digest, locked)


def valid_name(text):
    """Suite names and step ids: lower-case letters, digits and dashes. They become file names and words in
    rerun.sh, so this holds for a suite that loads and for a run that is imported."""
    return isinstance(text, str) and len(text) <= 64 and re.fullmatch(r"[a-z0-9][a-z0-9-]*", text) is not None


def validate(data, origin="suite"):
    def fail(msg):
        raise SsdbenchError(f"{origin}: {msg}")

    if data.get("format") != FORMAT:
        fail(f"format must be {FORMAT}, found {data.get('format')!r}")
    for key in ("name", "version", "title", "idle", "steps"):
        if key not in data:
            fail(f"missing key {key!r}")
    unknown = set(data) - SUITE_KEYS
    if unknown:
        fail(f"unknown keys {sorted(unknown)}")
    if not valid_name(data["name"]):
        fail(f"name {data['name']!r} must be lower-case letters, digits and dashes")
    _check_repeat(data.get("repeat", {}), fail)
    idle = data["idle"]
    if not isinstance(idle, dict) or set(idle) != {"seconds"}:
        fail("idle takes seconds only: the fixed idle before each step that idles, and between repeated runs")
    if (
        isinstance(idle["seconds"], bool)
        or not isinstance(idle["seconds"], int)
        or not 0 <= idle["seconds"] <= MAX_IDLE_S
    ):
        fail(f"idle.seconds must be a whole number of seconds from 0 to {MAX_IDLE_S}")
    ids = [s.get("id") for s in data["steps"]]
    if len(set(ids)) != len(ids):
        fail("step ids must be unique")
    for step in data["steps"]:
        sid = step.get("id") or "?"
        if not valid_name(step.get("id")):
            fail(f"step {sid}: id must be lower-case letters, digits and dashes")
        if step.get("kind") not in STEP_KINDS:
            fail(f"step {sid}: kind must be one of {STEP_KINDS}")
        unknown = set(step) - COMMON_KEYS - STEP_KEYS[step["kind"]]
        if unknown:
            fail(f"step {sid}: unknown keys {sorted(unknown)}")
        if not isinstance(step.get("cooldown"), bool):
            fail(f"step {sid}: cooldown must be true or false (whether the drive idles before the step)")
        try:
            _CHECKS.get(step["kind"], lambda s, i: None)(step, ids)
        except ValueError as exc:
            fail(f"step {sid}: {exc}")


def _check_repeat(table, fail):
    if not isinstance(table, dict) or set(table) - set(REPEAT_DEFAULTS):
        fail(f"repeat takes only {sorted(REPEAT_DEFAULTS)}")
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100:
            fail(f"repeat.{key} must be a percentage above 0, at most 100")


def _whole(step, key, minimum=1):
    if not isinstance(step.get(key), int) or step[key] < minimum:
        raise ValueError(f"{key} must be a whole number >= {minimum}")


def _span(span):
    if not isinstance(span, dict) or set(span) != {"offset", "size"}:
        raise ValueError("span must be {offset = ..., size = ...}")
    for value in span.values():
        if not str(value).endswith("%"):
            _size(value)


def _size(value):
    try:
        return parse_size(value)
    except SsdbenchError as exc:
        raise ValueError(str(exc)) from None


def reads_only(rw):
    """Whether a fio rw mode only reads (and so has no data content)."""
    return rw in ("read", "randread")


def check_job(job):
    """One fio job's parameters, as a fio step or one job of a matrix."""
    if job.get("rw") not in RW_MODES:
        raise ValueError(f"rw must be one of {RW_MODES}")
    if job.get("data") not in DATA_KINDS:
        raise ValueError(f"data must be one of {DATA_KINDS}")
    if reads_only(job["rw"]) != (job["data"] == "n/a"):
        raise ValueError("data must be 'n/a' exactly when the step only reads")
    _size(job.get("bs", ""))
    _whole(job, "iodepth")
    _whole(job, "numjobs")
    _span(job.get("span"))
    if "runtime" in job:
        _whole(job, "runtime")
    if "rwmixread" in job and not (isinstance(job["rwmixread"], int) and 0 <= job["rwmixread"] <= 100):
        raise ValueError("rwmixread must be a whole percentage 0..100")


def matrix_jobs(step):
    """The jobs of a matrix step: its explicit `jobs`, or every combination of its `axes`, in order.

    The step's `data` is the content of its writing jobs; a job that only reads has none.
    """
    base = {k: v for k, v in step.items() if k in JOB_KEYS}
    if "jobs" in step:
        jobs = [(job["name"], {**base, **{k: v for k, v in job.items() if k != "name"}}) for job in step["jobs"]]
    else:
        combos = [{}]
        for axis, values in step["axes"].items():
            combos = [{**c, axis: v} for c in combos for v in values]
        jobs = [(job_label(c, step["axes"]), {**base, **c}) for c in combos]
    for _, job in jobs:
        if reads_only(job.get("rw")):
            job["data"] = "n/a"
    return jobs


AXIS_LABELS = {
    "rw": "{}",
    "bs": "bs{}",
    "iodepth": "qd{}",
    "numjobs": "t{}",
    "rwmixread": "mix{}",
    "runtime": "{}s",
    "data": "{}",
}


def job_label(values, axes):
    """A matrix job's name from its axis values, e.g. read.qd32.bs4k."""
    return ".".join(AXIS_LABELS.get(axis, axis + "{}").format(values[axis]) for axis in axes)


def _check_fio(step, ids):
    check_job(step)
    if "randommap" in step and (step["randommap"] is not True or "runtime" in step or "rand" not in step["rw"]):
        raise ValueError("randommap = true is for a size-based random step: each block of its span once")
    if "runtime_per" in step and ("runtime" not in step or _size(step["runtime_per"]) <= 0):
        raise ValueError("runtime_per needs a runtime, and a size above 0 to scale it by")
    if "loops" in step:
        _whole(step, "loops")
        if "runtime" in step:
            raise ValueError("loops is for a size-based step: its span written over that many times")
    steady = step.get("steady")
    if steady is not None:
        # judged from the step's start on rounds of round_s, as many as its runtime holds (methodology 5)
        if not isinstance(steady, dict) or set(steady) != {"round_s"}:
            raise ValueError("steady must be {round_s = ...}")
        _whole(steady, "round_s")
        if "runtime" not in step:
            raise ValueError("a steady-state step must be time-based (runtime)")


def _check_matrix(step, ids):
    if ("jobs" in step) == ("axes" in step):
        raise ValueError("a matrix has either jobs or axes")
    if "axes" in step and (set(step["axes"]) - JOB_KEYS or not all(step["axes"].values())):
        raise ValueError(f"axes must be non-empty lists of job keys {sorted(JOB_KEYS)}")
    for job in step.get("jobs", []):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", str(job.get("name", ""))):
            raise ValueError("every job needs a name of letters, digits, dots and dashes")
        if set(job) - JOB_KEYS - {"name"}:
            raise ValueError(f"job {job['name']}: unknown keys {sorted(set(job) - JOB_KEYS - {'name'})}")
    names = [name for name, _ in matrix_jobs(step)]
    if len(set(names)) != len(names):
        raise ValueError("job names must be unique")
    for name, job in matrix_jobs(step):
        try:
            check_job(job)
        except ValueError as exc:
            raise ValueError(f"job {name}: {exc}") from None
    # A curve is drawn against block size, in bytes (derive.matrix_curves): no other axis has a unit to draw by.
    if "curve" in step and (step["curve"] != "bs" or "bs" not in step.get("axes", {})):
        raise ValueError("curve must be bs, one of the axes: a curve is MB/s against block size")


# A zone sweep's passes over the surface, in order: a write pass and a read pass (methodology 6).
SWEEP_PASSES = (["write", "read"], ["read", "write"])


def sweep_passes(step):
    """The order of a sweep's passes; a suite that does not state it writes first, so it reads what it wrote."""
    return step.get("passes", SWEEP_PASSES[0])


def _check_sweep(step, ids):
    _whole(step, "zones", 2)
    if sweep_passes(step) not in SWEEP_PASSES:
        raise ValueError(f"passes must be one of {' or '.join(map(str, SWEEP_PASSES))}")
    _size(step.get("zone_size", ""))
    _size(step.get("bs", ""))
    if "baseline" in step and step["baseline"] not in ids[: ids.index(step["id"])]:
        raise ValueError("baseline must name an earlier sweep step")


def _check_trace(step, ids):
    """A synthetic trace (profile and seed), or a tester's imported one (user_trace)."""
    if "user_trace" in step:
        _check_user_trace(step)
        return
    if step.get("profile") not in trace_profiles.PROFILES:
        raise ValueError(f"profile must be one of {sorted(trace_profiles.PROFILES)}")
    _whole(step, "seed", 0)


def _check_user_trace(step):
    spec = step["user_trace"]
    if "profile" in step or "seed" in step:
        raise ValueError("a trace step plays a profile (profile, seed) or a user_trace, not both")
    if not isinstance(spec, dict) or set(spec) != USER_TRACE_KEYS:
        raise ValueError(f"user_trace must have exactly the keys {sorted(USER_TRACE_KEYS)}")
    if not valid_name(spec["name"]) or not re.fullmatch(r"[0-9a-f]{64}", str(spec["sha256"])):
        raise ValueError("user_trace needs a trace name and the sha256 of its file")
    for key in ("reads", "writes", "bytes_read", "bytes_written"):
        _whole(spec, key, 0)
    segments = spec["segments"]
    if not isinstance(segments, list) or not segments or not all(_segment(s) for s in segments):
        raise ValueError("user_trace segments must be [queue depth, IO count] pairs of whole numbers >= 1")


def _segment(pair):
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) and v >= 1 for v in pair)


def _check_burst(step, ids):
    span = step.get("span")
    _span(span)
    for part, keys in BURST_KEYS.items():
        table = step.get(part)
        if not isinstance(table, dict) or set(table) != keys:
            raise ValueError(f"{part} must have exactly the keys {sorted(keys)}")
        _size(table["bs"])
        _size(table["burst"])
        _whole(table, "iodepth")
    _whole(step["foreground"], "bursts")
    _whole(step["background"], "seed", 0)
    # Each write the background keeps outstanding is a fio process of its own (run/burst.py).
    if step["background"]["iodepth"] > MAX_BACKGROUND_QD:
        raise ValueError(f"background.iodepth must be at most {MAX_BACKGROUND_QD}")
    idle = step["foreground"]["idle_s"]
    if not isinstance(idle, (int, float)) or idle < 0:
        raise ValueError("foreground.idle_s must be seconds >= 0")
    # fio's clock, a replayed iolog's wait, counts whole milliseconds
    every = step["background"]["every_s"]
    if (
        not isinstance(every, (int, float))
        or not 0 < every < math.inf
        or abs(every * 1000 - round(every * 1000)) > 1e-6
    ):
        raise ValueError("background.every_s must be seconds > 0, in whole milliseconds")


_CHECKS = {
    "fio": _check_fio,
    "matrix": _check_matrix,
    "sweep": _check_sweep,
    "trace": _check_trace,
    "burst": _check_burst,
}

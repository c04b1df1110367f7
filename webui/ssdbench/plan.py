"""Turn a suite and a drive's capacity into concrete steps: fio job files and time estimates.

Deterministic and free of I/O. A job file names the device as ${SSDBENCH_DUT}, which
fio expands from the environment, so the saved file re-runs anywhere with plain fio.
"""

from dataclasses import dataclass, field

from . import __version__
from .suites import parse_size

ALIGN = 1024 * 1024
DUT_VAR = "SSDBENCH_DUT"
DATA_OPTIONS = {
    "incompressible": {"refill_buffers": 1, "buffer_compress_percentage": 0},
    "compressible": {"refill_buffers": 1, "buffer_compress_percentage": 90, "buffer_compress_chunk": "4k"},
    "n/a": {},
}


@dataclass
class PlanStep:
    index: int
    id: str
    kind: str
    title: str
    estimate_s: float
    offset: int = 0
    size: int = 0
    runtime: int | None = None
    job_file: str | None = None
    options: dict = field(default_factory=dict)

    def to_dict(self):
        return {
            "index": self.index, "id": self.id, "kind": self.kind, "title": self.title,
            "estimate_s": self.estimate_s, "span": {"offset": self.offset, "size": self.size},
            "runtime": self.runtime, "options": self.options, "job_file": self.job_file,
        }


def _resolve(value, capacity):
    text = str(value)
    if text.endswith("%"):
        return capacity * float(text[:-1]) / 100
    return parse_size(text)


def span(step, capacity):
    """The byte range of a step: declared sizes are capped at the drive, and aligned to 1 MiB."""
    offset = int(_resolve(step["span"]["offset"], capacity)) // ALIGN * ALIGN
    size = min(int(_resolve(step["span"]["size"], capacity)), capacity - offset) // ALIGN * ALIGN
    return offset, size


def fio_options(step, offset, size):
    """The fio options of one step, in job-file order."""
    opts = {"rw": step["rw"], "bs": step["bs"], "iodepth": step["iodepth"], "numjobs": step["numjobs"],
            "offset": offset, "size": size}
    if "rwmixread" in step:
        opts["rwmixread"] = step["rwmixread"]
    if "runtime" in step:
        opts.update(runtime=step["runtime"], time_based=1)
    if step["numjobs"] > 1:
        opts["group_reporting"] = 1
    opts.update(DATA_OPTIONS[step["data"]])
    for log in ("bw", "iops", "lat", "hist"):
        opts[f"write_{log}_log"] = step["id"]
    return opts


def job_file(suite, step, opts):
    lines = [
        f"; ssdbench {__version__}, suite {suite.name} v{suite.data['version']} (sha256 {suite.sha256})",
        f"; step {step['id']}: {step['title']}",
        f"; re-run: {DUT_VAR}=/dev/<drive> fio --output-format=json {step['id']}.fio",
        "[global]",
        f"filename=${{{DUT_VAR}}}",
    ]
    lines += [f"{k}={v}" for k, v in suite.data.get("fio", {}).items()]
    lines.append(f"[{step['id']}]")
    lines += [f"{k}={v}" for k, v in opts.items()]
    return "\n".join(lines) + "\n"


def compile_plan(suite, capacity):
    """The steps of a suite on a drive of `capacity` bytes."""
    est = suite.data.get("estimate", {})
    write_rate = est.get("write_mb_s", 200) * 1e6
    read_rate = est.get("read_mb_s", est.get("write_mb_s", 200)) * 1e6
    steps = []
    for i, step in enumerate(suite.steps):
        if step["kind"] == "purge":
            steps.append(PlanStep(i, step["id"], "purge", step["title"], float(est.get("purge_s", 10)),
                                  0, capacity))
            continue
        offset, size = span(step, capacity)
        opts = fio_options(step, offset, size)
        if "runtime" in step:
            estimate = float(step["runtime"])
        else:
            rate = read_rate if step["rw"] in ("read", "randread") else write_rate
            estimate = size / rate
        steps.append(PlanStep(i, step["id"], "fio", step["title"], estimate, offset, size,
                              step.get("runtime"), job_file(suite, step, opts), opts))
    return steps


def estimate_seconds(plan):
    return sum(s.estimate_s for s in plan)

"""The workload hash: one sha256 over everything a suite makes a drive do, so that two results that carry
one hash ran the same IOs.

It covers the suite as parsed; every fio job file its plan renders (the fio options, the data pattern and
the logs among them; not the comment lines, which name the ssdbench release); the bytes of every trace
it plays, with the job file that replays it; and the bytes of the timed writes Mixed Burst's background
replays. The plan is rendered for a reference drive of 2 TB, larger
than every trace's footprint, so the hash does not depend on the drive a run uses. MANIFEST.json locks it
beside the suite hash: a trace profile, the data pattern or a job option that changes in the code, while
the suite file does not, still makes the suite refuse to run as standard.
"""

import dataclasses
import hashlib
import json

from ..errors import SsdbenchError
from ..suites import locked, trace_file, trace_generator
from . import burst, plan, playback

REFERENCE_CAPACITY = 2 * 10**12
_computed = {}  # suite hash -> workload hash: a trace takes seconds to generate, once per process is enough


def _sha(data):
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _job_text(job_file):
    return "".join(line for line in job_file.splitlines(keepends=True) if not line.startswith(";"))


def _trace_parts(suite, step):
    spec = step.spec
    trace = trace_generator.generate(spec["profile"], seed=spec["seed"], scale=spec["scale"])
    digest, jobs = hashlib.sha256(), []
    for qd, text in trace_file.text_chunks(trace):
        digest.update(text.encode())
        if qd is not None:
            jobs.append(playback.replay_job(len(jobs), qd))
    return [
        (f"{step.id}/trace.txt", digest.hexdigest()),
        (f"{step.id}/{step.id}.fio", _sha(_job_text(plan.job_file(suite, spec, jobs)))),
    ]


def parts(suite):
    """(what, sha256) of everything the workload hash covers, in the suite's order."""
    out = [("suite.json", _sha(locked.canonical(suite.data)))]
    for step in plan.compile_plan(suite, REFERENCE_CAPACITY):
        if step.kind == "trace":
            out += _trace_parts(suite, step)
        elif step.job_file:
            out.append((f"{step.id}/{step.id}.fio", _sha(_job_text(step.job_file))))
        if step.kind == "burst":
            out += [(f"{step.id}/{name}", digest) for name, digest in burst.replay_digests(step).items()]
    return out


def workload_sha256(suite):
    if suite.sha256 not in _computed:
        _computed[suite.sha256] = _sha("".join(f"{digest}  {what}\n" for what, digest in parts(suite)))
    return _computed[suite.sha256]


def manifest():
    """What MANIFEST.json must hold for the shipped suites as they are now. After a suite, a trace or a job
    option changes on purpose (and the suite's version with it): python -m ssdbench.run.workload >
    webui/ssdbench/suites/MANIFEST.json"""
    suites = [locked.load(name, allow_non_standard=True) for name in locked.names()]
    return {s.name: {"suite_sha256": s.sha256, "workload_sha256": workload_sha256(s)} for s in suites}


def verified(suite, allow_non_standard=False):
    """The suite with its workload hash. A locked suite whose workload no longer matches the manifest is
    refused, or with allow_non_standard runs marked non-standard, as a changed suite file is."""
    digest = workload_sha256(suite)
    expected = locked.locked_hashes(suite.name)[1]
    if suite.locked and digest != expected:
        if not allow_non_standard:
            raise SsdbenchError(
                f"suite {suite.name} refused: its workload hash {digest[:16]}... differs from the locked "
                f"{(expected or 'none')[:16]}...: a trace, the data pattern or a fio option changed in this "
                "release. Results from it would not be comparable; pass --non-standard to run it anyway, "
                "marked non-standard."
            )
        return dataclasses.replace(suite, locked=False, workload_sha256=digest)
    return dataclasses.replace(suite, workload_sha256=digest)


if __name__ == "__main__":
    print(json.dumps(manifest(), indent=2))

"""The workload hash: one sha256 over everything a suite makes a drive do, so that two results that carry
one hash ran the same IOs.

It covers the suite as parsed; every fio job file its plan renders (the fio options, the data pattern and
the logs among them; not the comment lines, which name the ssdbench release); the bytes of every trace
it plays, with the job file that replays it; and the bytes of the timed writes Mixed Burst's background
replays. The plan is rendered for a reference drive of 2 TB, larger
than every trace's footprint, so the hash does not depend on the drive a run uses. MANIFEST.json locks it
beside the suite hash: a trace profile, the data pattern or a job option that changes in the code, while
the suite file does not, still makes the suite refuse to run as standard.

A generated trace's bytes take seconds to make (the Heavy trace's 4 million IOs, about 7 s of CPU), and
the check runs at every run start. So the manifest also records, for each trace step, the trace's sha256
with the sha256 of its recipe: the generator's recipe version and figures, the profile and the seed,
everything the bytes follow from (trace_generator.recipe_sha256). While the recipe is the one recorded, its
digest is the recorded one; any change to the recipe, a profile or a seed makes the check generate the trace
and hash its bytes again. The playback hashes the bytes it generates too, and stops if they are not these
(playback.prepare).
"""

import dataclasses
import hashlib
import json
import os

from ..errors import SsdbenchError
from ..suites import locked, trace_file, trace_generator
from . import burst, plan, playback

REFERENCE_CAPACITY = 2 * 10**12
_computed = {}  # suite hash -> (workload hash, trace digests): once per process is enough
_generated = {}  # recipe hash -> the sha256 of the trace's bytes, generated in this process


def _sha(data):
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _job_text(job_file):
    return "".join(line for line in job_file.splitlines(keepends=True) if not line.startswith(";"))


def trace_digests(suite, recorded=None):
    """{step id: {"recipe_sha256", "sha256"}} of every trace the suite plays. A trace whose recipe is the one
    in `recorded` (the manifest's record of the suite) takes the recorded sha256; any other is generated and
    hashed."""
    recorded = recorded or {}
    out = {}
    for step in suite.steps:
        if step["kind"] != "trace":
            continue
        if "user_trace" in step:  # a tester's imported trace: the sha256 of its file, checked as it plays
            out[step["id"]] = {"sha256": step["user_trace"]["sha256"]}
            continue
        recipe = trace_generator.recipe_sha256(step["profile"], step["seed"])
        known = recorded.get(step["id"], {})
        if known.get("recipe_sha256") == recipe:
            digest = known["sha256"]
        else:
            if recipe not in _generated:
                _generated[recipe] = trace_file.digest(trace_generator.generate(step["profile"], step["seed"]))
            digest = _generated[recipe]
        out[step["id"]] = {"recipe_sha256": recipe, "sha256": digest}
    return out


def parts(suite, digests):
    """(what, sha256) of everything the workload hash covers, in the suite's order."""
    out = [("suite.json", _sha(locked.canonical(suite.data)))]
    for step in plan.compile_plan(suite, REFERENCE_CAPACITY):
        if step.kind == "trace":
            jobs = playback.replay_jobs(step.spec)
            out += [
                (f"{step.id}/trace.txt", digests[step.id]["sha256"]),
                (f"{step.id}/{step.id}.fio", _sha(_job_text(plan.job_file(suite, step.spec, jobs)))),
            ]
        elif step.job_file:
            out.append((f"{step.id}/{step.id}.fio", _sha(_job_text(step.job_file))))
        if step.kind == "burst":
            out += [(f"{step.id}/{name}", digest) for name, digest in burst.replay_digests(step).items()]
    return out


def _workload(suite, digests):
    return _sha("".join(f"{digest}  {what}\n" for what, digest in parts(suite, digests)))


def _hashes(suite):
    """(the suite's workload hash, its trace digests), trusting the manifest's digest of a trace whose
    recipe it records."""
    if suite.sha256 not in _computed:
        digests = trace_digests(suite, locked.locked_traces(suite.name) if suite.locked else None)
        _computed[suite.sha256] = (_workload(suite, digests), digests)
    return _computed[suite.sha256]


def workload_sha256(suite):
    return _hashes(suite)[0]


def manifest():
    """What MANIFEST.json must hold for the shipped suites as they are now, every trace generated and hashed.
    After a suite, a trace or a job option changes on purpose (and the suite's version with it), `python -m
    ssdbench.run.workload` writes it to webui/ssdbench/suites/MANIFEST.json."""
    out = {}
    for name in locked.names():
        s = locked.load(name, allow_non_standard=True)
        digests = trace_digests(s)
        out[name] = {"suite_sha256": s.sha256, "workload_sha256": _workload(s, digests), "traces": digests}
    return out


def verified(suite, allow_non_standard=False):
    """The suite with its workload hash and the sha256 of each trace it plays. A locked suite whose workload
    no longer matches the manifest is refused, or with allow_non_standard runs marked non-standard, as a
    changed suite file is."""
    digest, digests = _hashes(suite)
    traces = {step: d["sha256"] for step, d in digests.items()}
    expected = locked.locked_hashes(suite.name)[1]
    if suite.locked and digest != expected:
        if not allow_non_standard:
            raise SsdbenchError(
                f"suite {suite.name} refused: its workload hash {digest[:16]}... differs from the locked "
                f"{(expected or 'none')[:16]}...: a trace, the data pattern or a fio option changed in this "
                "release. Results from it would not be comparable; pass --non-standard to run it anyway, "
                "marked non-standard."
            )
        return dataclasses.replace(suite, locked=False, workload_sha256=digest, traces=traces)
    return dataclasses.replace(suite, workload_sha256=digest, traces=traces)


def write_manifest():
    """Write MANIFEST.json anew, once the whole manifest is made: making it reads the old one (the shipped suites'
    names), so a shell's redirect onto the file would empty it first. Returns its path."""
    path = locked.manifest_path()
    text = json.dumps(manifest(), indent=2) + "\n"
    with open(f"{path}.new", "w") as f:
        f.write(text)
    os.replace(f"{path}.new", path)
    return path


if __name__ == "__main__":
    print(write_manifest())

"""Run one fio step: write its job file, start fio, report progress each second, stop it cleanly.

fio writes its JSON (one document per second, then the final one) to fio.json and
its per-second logs beside it, in the step's folder. Those files are the raw
result; everything stored in the database is read back from them. A trace step runs
its job file in parts (`sections`), each with its own output name and no status
documents (see playback).
"""

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass

from ..system import redact, tools
from . import fio_output
from .plan import DUT_VAR

TICK_S = 0.5
STOP_GRACE_S = 30
STOPPED = "stopped by cancel"  # the error of every cancelled step and run
PR_SET_PDEATHSIG = 1


@dataclass
class Outcome:
    state: str  # done, failed or cancelled
    error: str | None = None
    doc: dict | None = None  # fio's final JSON document


def _child_setup(cpus):
    def setup():
        # If the runner is killed, fio must not go on writing to the drive on its own.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


def start(job_file_text, step_key, out_dir, device, cpus=None, sections=(), output="fio", status=True):
    """Start fio on the job file, or on its `sections` only; its JSON goes to <output>.json, its stderr to
    <output>.stderr, with a status document every second if `status`."""
    os.makedirs(out_dir, exist_ok=True)
    job_path = os.path.join(out_dir, f"{step_key}.fio")
    # in one step, put in place whole: a trace's next part starts while a fio that read it plays (playback)
    with open(f"{job_path}.part", "w") as f:
        f.write(job_file_text)
    os.replace(f"{job_path}.part", job_path)
    argv = [tools.require("fio"), "--output-format=json", f"--output={output}.json"]
    if status:
        argv.append("--status-interval=1")
    argv += [f"--section={name}" for name in sections]
    argv.append(os.path.basename(job_path))
    env = dict(redact.environment(os.environ), **{DUT_VAR: device})
    with open(os.path.join(out_dir, f"{output}.stderr"), "w") as err:
        return subprocess.Popen(
            argv,
            cwd=out_dir,
            env=env,
            stdin=subprocess.DEVNULL,  # never the console, as for every tool (tools.run)
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=_child_setup(cpus),
            start_new_session=True,
        )


class StatusReader:
    """Follows fio.json as it grows and yields each new --status-interval document."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.pending = ""
        self.last = None

    def poll(self):
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return []
        self.pending += chunk
        docs, used = fio_output.fio_stream(self.pending)
        self.pending = self.pending[used:]
        return docs


def run(
    job_file_text,
    step_key,
    out_dir,
    device,
    on_tick,
    should_stop,
    cpus=None,
    sections=(),
    output="fio",
    status=True,
    watch=None,
):
    """Run a step (or the `sections` of its job file) to its end (follow)."""
    proc = start(job_file_text, step_key, out_dir, device, cpus, sections, output, status)
    return follow(proc, out_dir, on_tick, should_stop, output, watch)


def follow(proc, out_dir, on_tick, should_stop, output="fio", watch=None, stop_signal=signal.SIGINT):
    """Follow a started fio to its end. Twice a second, on_tick(latest status document or None, IOPS, bytes/s),
    the rates None until two status documents have come, and watch(fio's pid) while fio runs. Once should_stop()
    says so, fio gets `stop_signal`, one of its clean stops (SIGINT or SIGTERM), and SIGKILL if it has not ended
    STOP_GRACE_S later."""
    reader = StatusReader(os.path.join(out_dir, f"{output}.json"))
    latest, iops, bw = None, None, None
    stopped_at = None
    while True:
        if watch:
            watch(proc.pid)
        rc = proc.poll()
        for doc in reader.poll():
            if latest is not None:
                iops, bw = fio_output.progress_between(latest, doc)
            latest = doc
        on_tick(latest, iops, bw)
        if rc is not None:
            break
        if stopped_at is None and should_stop():
            # fio's own clean stop: it ends the jobs and still writes its result.
            proc.send_signal(stop_signal)
            stopped_at = time.monotonic()
        elif stopped_at is not None and time.monotonic() - stopped_at > STOP_GRACE_S:
            proc.kill()
        time.sleep(TICK_S)
    return collect(out_dir, rc, cancelled=stopped_at is not None, output=output)


def stderr_message(out_dir, output="fio"):
    """fio's own error lines, as it printed them."""
    try:
        with open(os.path.join(out_dir, f"{output}.stderr")) as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return ""
    errors = [line for line in lines if "error" in line.lower() or line.startswith("fio:")]
    return "; ".join(errors or lines[-3:])


def collect(out_dir, rc, cancelled=False, output="fio"):
    """A finished step's state and fio's final JSON document (None if fio wrote none)."""
    try:
        with open(os.path.join(out_dir, f"{output}.json")) as f:
            text = f.read()
    except FileNotFoundError:  # fio stopped, or failed, before it opened its output
        text = ""
    docs = fio_output.fio_documents(text)
    doc = docs[-1] if docs else None
    # A cancelled step says so, whatever fio managed to write before it stopped (maybe nothing at all).
    if cancelled:
        return Outcome("cancelled", STOPPED, doc)
    message = stderr_message(out_dir, output)
    if doc is None:
        return Outcome("failed", message or f"fio exited with status {rc} and wrote no result")
    job_error = fio_output.fio_job_error(doc)
    if rc != 0 or job_error:
        return Outcome("failed", message or f"fio reported error {job_error} ({os.strerror(job_error)})", doc)
    return Outcome("done", doc=doc)

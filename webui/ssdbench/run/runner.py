"""Execute a run: hold the lock, walk the plan, write progress, sample the drive's temperature beside the
steps, handle cancel, crash and failure.

This is the only writer of run state. Each step is stored whole when it ends, so
whatever stops the run (cancel, a vanished drive, a full data partition, a power cut)
leaves every completed step intact.
"""

import contextlib
import fcntl
import json
import os
import signal
import threading
import time

from ..drives import discovery, health, purge
from ..errors import SsdbenchError
from ..results import store
from ..suites import locked
from ..system import durable, tools
from . import (
    burst,
    cpu_wait,
    derive,
    environment,
    fio,
    fio_output,
    handoff,
    host_cost,
    pace,
    plan,
    playback,
    quiet,
    space,
)

LOCK_NAME = "run.lock"
STOPPED = fio.STOPPED


class RunLock:
    """An exclusive flock on data_dir/run.lock: the kernel drops it when the holder dies."""

    def __init__(self, data_dir):
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, LOCK_NAME)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def acquire(self):
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            holder = read_lock(os.path.dirname(self.path))
            raise SsdbenchError(
                f"another run is active (run {holder.get('run_id', '?')} on "
                f"{holder.get('device', '?')}, pid {holder.get('pid', '?')}); "
                "wait for it to end or cancel it with `ssdbench cancel`"
            ) from None
        return self

    def record(self, **info):
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps({"pid": os.getpid(), **info}).encode(), 0)

    def release(self):
        os.ftruncate(self.fd, 0)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def read_lock(data_dir):
    try:
        with open(os.path.join(data_dir, LOCK_NAME)) as f:
            return json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return {}


def check_target(drive, confirm, destroy_data):
    if not drive["eligible"]:
        raise SsdbenchError(f"{drive['path']} is not a valid target: {drive['reason']}")
    if confirm != drive["confirm_id"]:
        raise SsdbenchError(
            f"confirmation does not name the drive: running a suite destroys all data on "
            f"{drive['path']} ({drive.get('model') or drive['transport']}); to go on, pass "
            f"--confirm {drive['confirm_id']}"
        )
    if drive["needs_wipe_confirmation"] and not destroy_data:
        raise SsdbenchError(f"{drive['path']} {drive['reason']}")


class StopSignals:
    """While installed, SIGTERM and SIGINT only set `received`: the run ends at its next check, as
    cancelled, whatever it was doing when the signal came (starting, waiting for fio, parsing)."""

    def __init__(self):
        self.received = False
        self.previous = {}

    def __enter__(self):
        for s in (signal.SIGTERM, signal.SIGINT):
            self.previous[s] = signal.signal(s, self.on_signal)
        return self

    def on_signal(self, signum, frame):
        self.received = True

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)


class Run:
    def __init__(
        self, db, data_dir, run_id, drive, suite, steps, signals, on_progress=None, cpus=None, idle_first=False
    ):
        """idle_first: the run idles before its first step too, as a later run of a repeat set does."""
        self.resumed = None  # the entry of a run resumed after a cut (resume_entry): its steps from the entry's first
        self.suite = suite
        self.on_progress = on_progress
        self.cpus = cpus
        self.idle_first = idle_first
        self.db, self.data_dir, self.run_id, self.drive, self.steps = db, data_dir, run_id, drive, steps
        # The host-cost calibration comes first, and counts as done once it has run (calibrate).
        self.native = handoff.native()  # our fio: jobs hand over through FIFOs
        self.calibration_s = host_cost.seconds(steps, self.native)
        self.calibrated_s = 0.0
        self.total_estimate = plan.estimate_seconds(steps) + self.calibration_s or 1.0
        self.signals = signals
        self.cancel = False
        self.full = False
        self.last_cancel_check = 0.0
        self.run_dir = store.run_dir(data_dir, run_id)
        os.makedirs(self.run_dir, exist_ok=True)
        self.serial = discovery.serial_now(drive)
        self.temperatures = None  # the run's TemperatureLog, while the steps run
        self.calibration = None  # what this PC costs each job's IO (host_cost), once calibrate() has run
        self.percent = 0.0  # the most of the run shown done
        self.pace = pace.Pace(steps)  # the ETA, learned from the steps as they end

    def calibrate(self):
        """The host's cost of each job of the plan, measured on fio's CPU before the first step, as the environment
        keeps it; why it is unknown when fio could not measure it (the figures then carry no host share)."""
        # The live view says what the run does from its first second: no step yet, the whole run's ETA.
        self.store_progress(None, 0.0, self.total_estimate)
        try:
            self.calibration = host_cost.calibrate(
                self.suite, self.steps, self.run_dir, self.cpus, self.should_stop, self.native
            )
        except SsdbenchError as exc:
            return {"unavailable": str(exc), "failed": True}
        finally:
            self.calibrated_s = self.calibration_s
        return self.calibration or {"unavailable": "no step of the suite plays a job the null engine can"}

    def calibrate_again(self):
        """At the run's end, on the same CPU: a few of the jobs calibrated through the kernel, played again
        (host_cost.again), to show a CPU whose speed moved while the steps ran."""
        return host_cost.again(self.suite, self.calibration, self.run_dir, self.cpus, self.should_stop, self.native)

    def should_stop(self, now=False):
        """A signal, or a cancel in the database (read at most once a second, unless `now`)."""
        if self.signals.received:
            self.cancel = True
        clock = time.monotonic()
        if not self.cancel and (now or clock - self.last_cancel_check >= 1.0):
            self.last_cancel_check = clock
            self.cancel = store.cancel_requested(self.db, self.run_id)
        return self.cancel

    def room_left(self):
        """False once the data partition is full. fio meets a full disk without a word (it exits 0, its JSON
        cut short and its logs empty), so the runner looks for itself: before each step, twice a second while
        fio runs, and after it."""
        if not self.full:
            self.full = store.free_bytes(self.data_dir) < store.FULL_BELOW
        return not self.full

    def no_room(self):
        """The error of a step that ends for want of room on the data partition, else None. The reserve goes
        first, so that the failure can be recorded: call it only once fio has ended, or fio would fill that too."""
        if self.room_left():
            return None
        store.release_reserve(self.data_dir)
        return (
            f"data partition full: no room left in {self.data_dir} for the step's results; the steps before it are kept"
        )

    def progress(self, idx, fraction, iops=None, bw=None):
        done = self.calibrated_s + sum(s.estimate_s for s in self.steps[:idx])
        current = self.steps[idx].estimate_s if idx < len(self.steps) else 0
        eta = self.pace.left(idx, fraction)
        # Never backwards: a step's own count (fio's elapsed time, its bytes) may fall short of the estimate
        # that the next step starts from; every step done is 100%, whatever the float sums of the estimates in
        # another order give.
        done_now = 100.0 if idx == len(self.steps) else 100.0 * (done + fraction * current) / self.total_estimate
        percent = max(self.percent, min(100.0, done_now))
        self.percent = percent
        self.store_progress(idx, percent, eta, iops, bw)
        if self.on_progress:
            self.on_progress(idx, len(self.steps), percent, eta, iops, bw)

    def store_progress(self, idx, percent, eta, iops=None, bw=None):
        try:
            store.update_progress(self.db, self.run_id, idx, percent, eta, iops, bw)
        except store.DataFull:
            self.full = True  # fio, if it runs, is stopped at its next tick

    def fraction(self, step, doc, started, out_dir):
        """How far the step is: fio's own count for a single job, the IOs of the segments played for a trace,
        else time against the estimate."""
        if step.kind == "trace":
            return min(0.99, playback.played(out_dir, step))
        if step.kind == "fio" and doc is not None:
            job = doc["jobs"][0]
            if step.runtime:
                return min(1.0, job["elapsed"] / step.runtime)
            done = sum(job[d]["io_bytes"] for d in fio_output.DIRECTIONS)
            return min(1.0, done / max(1, step.size * step.spec["numjobs"] * step.spec.get("loops", 1)))
        return min(0.99, (time.monotonic() - started) / max(1.0, step.estimate_s))

    def run_step(self, step):
        out_rel = store.step_folder(self.run_id, step.index, step.id)
        out_dir = os.path.join(self.data_dir, out_rel)
        sid = store.start_step(self.db, self.run_id, step.index, out_rel)
        self.progress(step.index, 0.0)
        detail = self.settle(step)
        if self.resumed and step.index <= self.resumed["cut_step_index"]:
            detail["resumed"] = resumed_note(self.resumed, step.index)
        if self.should_stop():
            store.finish_step(self.db, sid, "cancelled", error=STOPPED, detail=detail)
            return "cancelled", STOPPED
        # Heat (results/validity, rule 8): the drive's counters of time spent hot from here, the end of the
        # step's idle, to its end, and its temperature over the same span.
        work_from, counters = time.time(), health.thermal_counters(self.drive)

        def finish(state, error=None, metrics=(), series=()):
            metrics = list(metrics) + self.heat(work_from, counters, detail)
            store.finish_step(self.db, sid, state, error=error, detail=detail, metrics=metrics, series=series)

        refused = self.swapped() or self.no_room()
        if refused:
            finish("failed", refused)
            return "failed", refused
        if step.kind in ("purge", "trim"):
            try:
                with self.io_only():
                    detail |= purge.purge(self.drive) if step.kind == "purge" else purge.timed_trim(self.drive)
            except SsdbenchError as exc:
                state, error = self.failed_or_cancelled(str(exc))
                finish(state, error)
                return state, error
            metrics = (
                []
                if step.kind == "purge"
                else [
                    derive.Metric(
                        "trim.seconds", detail["seconds"], "s", f"wall time of `{' '.join(detail['command'])}`"
                    )
                ]
            )
            finish("done", metrics=metrics)
            return "done", None
        trace = None
        job_text = step.job_file
        adapted = plan.adaptation_notes(step.adapted)
        if step.kind == "trace":
            trace, job_text, detail["trace"] = playback.prepare(
                step,
                out_dir,
                self.drive["capacity_bytes"],
                self.suite,
                self.data_dir,
                self.drive["logical_block_size"],
                self.native,
            )
            adapted += playback.adaptation_notes(detail["trace"])
            store.set_job_file(self.db, sid, job_text)
        elif step.kind == "burst":
            detail["background"] = burst.prepare(step, out_dir)
        if adapted:
            detail["adapted"] = adapted
        started = time.monotonic()
        clock = environment.StepClock(self.cpus)  # fio's CPU's clock while the step runs
        waited = cpu_wait.CpuWait()

        def tick(doc, iops, bw):
            clock.sample()
            self.progress(step.index, self.fraction(step, doc, started, out_dir), iops, bw)

        # The kernel's own count of the time the drive was busy, around the fio of a trace step only: the
        # busy time that derive rebuilds from fio's logs is checked against it (results/validity).
        ticks_before = discovery.io_ticks(self.drive["path"]) if step.kind == "trace" else None

        def stop():
            return self.should_stop() or not self.room_left()

        with self.io_only():
            if trace is not None:
                outcome = playback.play(
                    trace, job_text, step, out_dir, self.drive["path"], tick, stop, self.cpus, waited.sample
                )
            else:
                outcome = fio.run(
                    job_text, step.id, out_dir, self.drive["path"], tick, stop, self.cpus, watch=waited.sample
                )
        # The step's wall time around fio, its start and end included: a sweep's passes are measured against it.
        detail["fio_s"] = round(time.monotonic() - started, 3)
        ticks_after = discovery.io_ticks(self.drive["path"]) if ticks_before is not None else None
        detail["cpu_clock"] = clock.record()
        detail["cpu_wait"] = waited.record()
        full = self.no_room()
        if full:  # what fio wrote is cut short somewhere: none of it is a result
            outcome.state, outcome.error, outcome.doc = "failed", full, None
        elif outcome.state == "failed" and discovery.capacity(self.drive["path"]) == 0:
            outcome.error = f"the drive {self.drive['path']} vanished during the step; fio said: {outcome.error}"
        metrics, series = [], []
        if outcome.doc is not None:
            try:
                metrics, series = derive.step_results(
                    step, out_dir, outcome.doc, outcome.state == "done", self.baseline(step)
                )
            except SsdbenchError as exc:
                outcome.state, outcome.error = "failed", f"step {step.id}: {exc}"
            metrics += host_cost.shares(step, outcome.doc, self.calibration) + cpu_wait.metrics(detail["cpu_wait"])
            if ticks_after is not None:
                detail["io_ticks"] = {"file": ticks_before[0], "before_ms": ticks_before[1], "after_ms": ticks_after[1]}
                metrics.append(kernel_busy(detail["io_ticks"]))
        if outcome.state == "failed":
            outcome.state, outcome.error = self.failed_or_cancelled(outcome.error)
        # fio's files reach the disk before their step is recorded as done: a power cut cannot split them.
        durable.sync_folder(out_dir)
        finish(outcome.state, outcome.error, metrics, series)
        return outcome.state, outcome.error

    def io_only(self):
        """Around a step's IO: the temperature sampler holds off where reading the temperature would disturb
        the drive (TemperatureLog.between_io)."""
        return self.temperatures.between_io() if self.temperatures else contextlib.nullcontext()

    def heat(self, since, before, detail):
        """A step's heat from `since` (the end of its idle) to now: how the drive's counters of time spent hot
        moved (detail `thermal`, as health.thermal_between: each counter before and after and which rose, or why
        they are unknown), and its temperature figures (TemperatureLog.figures)."""
        detail["thermal"] = health.thermal_between(before, health.thermal_counters(self.drive))
        if not self.temperatures:
            return []
        self.temperatures.read_now()  # a step shorter than a second is read at least once
        return self.temperatures.figures(since, time.time())

    def settle(self, step):
        """Before a step: the suite's fixed idle where it asks for one (none where the step measures the state the
        step before it left; before the first step of a repeat set's later run, the idle between runs), whatever
        the drive's temperature; then that temperature as the step begins (None where it cannot be read), which
        results/validity judges against the run's idle temperature."""
        minimum = locked.idle_seconds(self.suite.data)
        if step.spec["cooldown"] or self.idle_first:
            cool = quiet.idle(minimum, self.should_stop)
            if self.idle_first:
                cool["between_runs"], self.idle_first = True, False
        else:
            cool = {"state": "not asked", "reason": "the suite starts this step at once", "idled_s": 0.0}
        return {"cool_down": cool, "began_at_c": health.read_temperature(self.drive.get("temperature_source"))}

    def swapped(self):
        """Why the drive on the run's device node is no longer the one the run began on, if it is not: another
        drive put on the same node (a hot swap, a re-enumeration after a reset) must not take the next step."""
        now = discovery.serial_now(self.drive)
        if self.serial is None or now == self.serial:
            return None
        path = self.drive["path"]
        if now is None:
            return f"the drive on {path} (serial {self.serial}) is gone"
        return f"{path} is now another drive (serial {now}), not the one this run began on (serial {self.serial})"

    def failed_or_cancelled(self, error):
        """A step that breaks after a cancel was asked for is cancelled: stopping fio early, or a
        signal at its start, can cut its output short, and that is the cancel's doing. One that breaks on a
        full data partition failed for that."""
        full = self.no_room()
        if full:
            return "failed", full
        return ("cancelled", STOPPED) if self.should_stop(now=True) else ("failed", error)

    def baseline(self, step):
        """What earlier steps give a step to be measured against: a later sweep, the clean sweep's average write
        MB/s, which its recovery is measured against; a steady-state step, the bytes the run wrote since its last
        purge, and where they come from, the drive fills before its judged window (derive.window_fills)."""
        if "steady" in step.spec:
            return self.written_since_purge(step)
        key = step.spec.get("baseline") if step.kind == "sweep" else None
        return store.step_metric(self.db, self.run_id, key, "write.avg_mb_s") if key else None

    def written_since_purge(self, step):
        """(bytes, where from): what the run's steps before `step` wrote since its last purge, as fio counted it;
        since the run's start where no purge came before it."""
        keys, start = [], "the run's start (what the drive held before the run is not known)"
        for earlier in reversed([s for s in self.steps if s.index < step.index]):
            if earlier.kind == "purge":
                start = f"the purge step {earlier.id}"
                break
            keys.insert(0, earlier.id)
        written = sum(store.written_bytes(self.db, self.run_id, key) for key in keys)
        return written, f"write.io_bytes of the steps since {start}: {', '.join(keys) or 'none'}"

    def walk_steps(self, ending=None):
        """The steps, the health snapshot after them, then `ending(before, after)` (the two snapshots; after is
        None when the run failed) before the run is recorded as ended."""
        before = after = None
        with TemperatureLog(self.data_dir, self.run_id, self.drive) as self.temperatures:
            state, error = self.each_step()
            if state != "failed":
                before = self.read_json("health-before.json")
                after = health.snapshot(self.drive)
                after["host_bytes_written_during_run"] = health.written_between(before, after)
                self.write_json("health-after.json", after)
        self.temperatures = None
        if ending:
            ending(before, after)
        if state == "done":
            self.progress(len(self.steps), 0.0)
        store.finish_run(self.db, self.run_id, state, error)
        return state, error

    def each_step(self):
        """The health snapshot before (a resumed run keeps the one from its start, where it was cut after taking
        it), then the steps in order, from the resumed run's first, until one does not end done."""
        if not (self.resumed and os.path.exists(os.path.join(self.run_dir, "health-before.json"))):
            self.write_json("health-before.json", health.snapshot(self.drive))
        for step in self.steps[self.resumed["from_step_index"] if self.resumed else 0 :]:
            if self.should_stop():
                return "cancelled", STOPPED
            self.pace.start(step.index)
            try:
                state, error = self.run_step(step)
            except (SsdbenchError, OSError) as exc:
                state, error = self.failed_or_cancelled(f"step {step.id}: {exc}")
                store.finish_step(self.db, store.step_id(self.db, self.run_id, step.index), state, error=error)
            self.pace.end(step.index)
            if state != "done":
                return state, error
        return "done", None

    def read_json(self, name):
        with open(os.path.join(self.run_dir, name)) as f:
            return json.load(f)

    def write_json(self, name, data):
        with open(os.path.join(self.run_dir, name), "w") as f:
            json.dump(data, f, indent=1)


def kernel_busy(ticks):
    """The seconds the kernel counted the drive busy during a step: the rise of its io_ticks."""
    return derive.Metric(
        "kernel.busy_s",
        (ticks["after_ms"] - ticks["before_ms"]) / 1000,
        "s",
        f"io_ticks (field 10 of {ticks['file']}, ms) read after the step's fio minus before, / 1000",
    )


class TemperatureLog:
    """The drive's temperature once a second, from the start of the steps to their end, into the run's series
    "temperature", and each second above the drive's warning temperature into "temperature.above_warning".

    A thread of its own samples beside the steps, so that no second goes unread while the runner waits on
    something else: a purge, a TRIM, a cool-down, fio. It writes through a connection of its own, as a SQLite
    connection must not pass between threads. Leaving the block stops it at once (an event, not a sleep) and
    waits for it, whatever ended the steps, so that the run is recorded as ended only with all its points. A
    drive with no temperature source gets neither series nor thread.

    On a SATA or USB drive every read of its temperature is an ATA command that is not queued (SMART READ DATA,
    or the SCT status that drivetemp reads, through ATA PASS-THROUGH): the drive finishes every queued command
    before it, so a read during a step's IO would drain its NCQ queue once a second. There the sampler holds off
    through each step's IO (between_io) and reads once as the IO starts and once as it ends; an NVMe drive's
    temperature is an admin command beside its IO queues, read once a second throughout."""

    def __init__(self, data_dir, run_id, drive):
        self.data_dir, self.run_id = data_dir, run_id
        self.source = drive.get("temperature_source")
        self.warning = drive.get("warning_temp_c")
        self.between_steps_only = drive.get("transport") in ("sata", "usb")
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.sample, name=f"run {run_id} temperature")
        # Every read, as (wall time, °C), for the steps' figures; those not yet stored; whether the IO holds it off.
        self.lock = threading.Lock()
        self.reads, self.unstored, self.held = [], [], False

    def __enter__(self):
        if self.source:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        if self.source:
            self.thread.join()

    def read(self):
        """Read the temperature now, under the lock, and keep it (None when it cannot be read)."""
        value = health.read_temperature(self.source)
        if value is not None:
            self.reads.append((time.time(), value))
            self.unstored.append(self.reads[-1])
        return value

    def read_now(self):
        """One read now, beside the sampler's, as a step ends (its IO is over). A SATA or USB drive was read as its
        IO ended (between_io): a second read at once would only send the drive another non-queued command."""
        if self.source and not self.between_steps_only:
            with self.lock:
                self.read()

    @contextlib.contextmanager
    def between_io(self):
        """Around a step's IO: on a SATA or USB drive, one read as it starts, none during it, one as it ends.
        Once entered, no read is in flight."""
        if not (self.source and self.between_steps_only):
            yield
            return
        with self.lock:
            self.read()
            self.held = True
        try:
            yield
        finally:
            with self.lock:
                self.held = False
                self.read()

    def figures(self, since, until):
        """A step's temperature metrics from the reads between `since` and `until` (wall times): its most, and
        where the drive gives a warning temperature and was read once a second, the seconds read at or above
        it. None without a read: unknown, never cool."""
        with self.lock:
            values = [v for t, v in self.reads if since <= t <= until]
        if not values:
            return []
        if self.between_steps_only:
            how = "read as its IO started and as it ended (never during it: on SATA a read drains the NCQ queue)"
        else:
            how = "read once a second"
        out = [
            derive.Metric(
                "temperature.max_c",
                max(values),
                "°C",
                f"{self.source}: the most of {len(values)} reads, {how} and as it ended, from the end of its idle "
                "to its end",
            )
        ]
        if self.warning is not None and not self.between_steps_only:
            out.append(
                derive.Metric(
                    "temperature.at_or_above_warning_s",
                    float(sum(v >= self.warning for v in values)),
                    "s",
                    f"{self.source}: the seconds read at or above the drive's warning temperature, {self.warning} °C, "
                    f"of {len(values)} read once a second and as it ended, from the end of its idle to its end",
                )
            )
        return out

    def sample(self):
        db = store.connect(self.data_dir)
        try:
            # x is in ms since the run's recorded start, by the wall clock: the clock of the steps'
            # started_at and finished_at, which the report draws the series under.
            started_at = store.get_run(db, self.run_id)["started_at"]
            series = store.add_series(db, self.run_id, None, "temperature", "°C", self.source, [])
            hot = None
            due = time.monotonic()
            while True:
                stopping = self.stopped.is_set()
                with self.lock:
                    if not self.held and not stopping:
                        self.read()
                    points, self.unstored = self.unstored, []
                for at, value in points:
                    point = (int((at - started_at) * 1000), value)
                    try:
                        store.append_points(db, series, [point])
                        if self.warning is not None and value > self.warning:
                            if hot is None:
                                source = f"{self.source}, seconds above {self.warning} °C"
                                hot = store.add_series(
                                    db, self.run_id, None, "temperature.above_warning", "°C", source, []
                                )
                            store.append_points(db, hot, [point])
                    except store.DataFull:
                        pass  # a second the full disk cannot take stays out: a gap, not a made-up point
                if stopping:
                    break
                # On the second, not a second after the last read: a slow read (smartctl) does not push every
                # later sample back, and one that took longer than a second is followed at once.
                due = max(due + 1.0, time.monotonic())
                self.stopped.wait(due - time.monotonic())
        finally:
            db.close()


def check_host():
    """What every run needs before it takes the lock: root and fio."""
    if os.geteuid() != 0:
        raise SsdbenchError("ssdbench must run as root to open raw block devices; run it with sudo")
    tools.require("fio")


def fio_data():
    """What the host's fio makes the suites' data with: our patch's scramble_buffers=hash where it has it, else
    the suites' data of before (plan.STOCK), which says why."""
    return plan.HASHED if "hash" in tools.fio_values("scramble_buffers") else plan.STOCK


def prepare(data_dir, suite, device, confirm, destroy_data=False, allow_usb=False):
    """The drive, checked as a target against the tester's confirmation, and the suite's plan on it, checked
    to fit in the data folder."""
    drive = discovery.find(device, allow_usb=allow_usb)
    check_target(drive, confirm, destroy_data)
    if drive["transport"] == "nvme":
        tools.require("nvme")
    steps = plan.compile_plan(suite, drive["capacity_bytes"], drive["logical_block_size"], fio_data())
    space.check(data_dir, suite, steps)
    return drive, steps


def prepare_again(data_dir, suite, request):
    """prepare() with what the tester asked for when the run was queued (or its repeat set began), as the drive
    may have changed since: it must still be eligible, named by the confirmation, and of the same capacity."""
    drive, steps = prepare(
        data_dir, suite, request["device"], request["confirm"], request["destroy_data"], request["allow_usb"]
    )
    if drive["capacity_bytes"] != request["capacity_bytes"]:
        raise SsdbenchError(
            f"{drive['path']} now holds {drive['capacity_bytes']} bytes, not the "
            f"{request['capacity_bytes']} it held when the run was queued"
        )
    return drive, steps


def run_in_foreground(
    data_dir, suite, device, confirm, destroy_data=False, allow_usb=False, on_progress=None, resume=None
):
    """Run `suite` on `device`, in the foreground; or with `resume`, resume that interrupted run of the suite from
    the step resume_entry says (docs/methodology.md, "A run cut off"). Returns (run id, final state, error).
    SIGTERM and SIGINT cancel it, from the moment the lock is asked for."""
    check_host()
    with StopSignals() as signals:
        lock = RunLock(data_dir).acquire()
        try:
            db = store.connect(data_dir)
            store.mark_interrupted(db)
            drive, steps = prepare(data_dir, suite, device, confirm, destroy_data, allow_usb)
            entry = None if resume is None else resumable(db, resume, drive, steps)
            if signals.received:
                raise SsdbenchError("cancelled before the run started; nothing was written to the drive")
            if entry is None:
                run_id = store.create_run(db, drive, suite, steps)
            else:
                run_id = resume
                stop_leftovers(store.run_dir(data_dir, run_id))
                store.resume_run(db, data_dir, run_id, suite.sha256, entry)
            return (
                run_id,
                *run_under_lock(db, data_dir, lock, run_id, suite, drive, steps, signals, on_progress, resumed=entry),
            )
        finally:
            lock.release()


def run_under_lock(
    db, data_dir, lock, run_id, suite, drive, steps, signals, on_progress=None, set_idle=None, resumed=None
):
    """Execute a run that the store holds as running, under the held lock, with the caller's
    StopSignals installed: quiet the OS, record the environment, walk the steps. `set_idle`: for a later run
    of a repeat set, its first run's recorded idle ({"temperature_c", "of_run"}). `resumed`: the entry of a run
    resumed after a cut, which walks its steps from the entry's first one; its environment is measured again and
    keeps every resume. Returns (final state, error).
    What a run killed before it (its crash record) had changed of the testbed is put back first, and the
    environment's `recovered` says so."""
    lock.record(run_id=run_id, device=drive["path"])
    recovered = quiet.recover(data_dir)
    try:
        store.hold_reserve(data_dir)
    except OSError as exc:  # the partition filled up since the run was checked to fit
        store.release_reserve(data_dir)
        error = f"data partition full: no room in {data_dir} for the run's reserve ({exc.strerror})"
        store.finish_run(db, run_id, "failed", error)
        return "failed", error
    controls = quiet.Quiet(drive, quiet.Record(data_dir, run_id, drive))
    try:
        env = environment.fingerprint(suite, drive)
        env["data"] = (steps[0].data if steps else fio_data()).record()
        if resumed:
            env["resumed"] = store.get_run(db, run_id)["environment"]["resumed"]
        if recovered is not None:
            env["recovered"] = recovered
        env["controls"] = controls.apply()
        # The idle temperature that a step after an idle is judged against (begun hot, results/validity): the
        # drive's now, or for a later run of a repeat set its first run's, so that a run of a set that starts in
        # the heat the one before it left is flagged.
        env["idle"] = set_idle or {"temperature_c": health.read_temperature(drive.get("temperature_source"))}
        run = Run(
            db, data_dir, run_id, drive, suite, steps, signals, on_progress, controls.fio_cpus, set_idle is not None
        )
        run.resumed = resumed
        env["host_cost"] = run.calibrate()
        store.set_environment(db, run_id, env)
        run.write_json("environment.json", env)

        def ending(before, after):
            # The host's cost again at the end of a run that ran its steps, under the same controls as at its start.
            # What the run changed is put back before it is recorded as ended, and the record says how: the
            # environment holds both ends of the run, with how the drive's counters of time spent hot moved.
            if after is not None and run.calibration and not run.should_stop(now=True):
                env["host_cost"]["end"] = run.calibrate_again()
            env["restored"] = controls.restore()
            env["thermal"] = health.thermal_between(before, after)
            store.set_environment(db, run_id, env)
            run.write_json("environment.json", env)

        return run.walk_steps(ending)
    finally:
        controls.release()
        store.release_reserve(data_dir)


def resume_entry(run):
    """Where an interrupted run resumes: the step that was cut (the one left interrupted; none was: the first that
    did not run), and the step it starts again from, the last purge at or before it (none: the run's first step),
    so that the cut step meets the drive in the state it declares. Every step from there runs again."""
    steps = run["steps"]
    cut = next((s for s in steps if s["state"] == "interrupted"), None) or next(
        (s for s in steps if s["state"] not in ("done",)), None
    )
    if cut is None:
        raise SsdbenchError(f"run {run['id']} has no step left to run")
    start = max((s["idx"] for s in steps[: cut["idx"] + 1] if s["kind"] == "purge"), default=0)
    return {
        "at": time.time(),
        "cut_at": run["finished_at"],
        "cut_step": cut["key"],
        "cut_step_index": cut["idx"],
        "from_step": steps[start]["key"],
        "from_step_index": start,
    }


def resumed_note(entry, index):
    """What a step run again after a resume says of it."""
    what = "the step that was cut off" if index == entry["cut_step_index"] else f"run again before {entry['cut_step']}"
    return (
        f"{what}: the run was cut off (crash or power loss) in step {entry['cut_step']} and resumed from step "
        f"{entry['from_step']}, so that {entry['cut_step']} starts from the state it declares"
    )


def stop_leftovers(run_dir, timeout_s=30):
    """End the processes left working in the run's folder (fio's jobs outlive their fio when it is killed, and go on
    writing to the drive), and wait for them to be gone. A process is the run's if its working folder is in it."""
    inside = os.path.realpath(run_dir) + os.sep
    deadline = time.monotonic() + timeout_s
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if (cwd + os.sep).startswith(inside):
                left.append(int(pid))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        if not left:
            return
        if time.monotonic() > deadline:
            raise SsdbenchError(f"processes {left} of the cut run go on working in {run_dir}")
        time.sleep(0.1)


def resumable(db, run_id, drive, steps):
    """The resume_entry of run `run_id`, once it is known to have run on this drive and this plan."""
    run = store.get_run(db, run_id)
    if run is None:
        raise SsdbenchError(f"no run {run_id}")
    if any(drive.get(k) != run["drive"].get(k) for k in ("capacity_bytes", "confirm_id", "serial", "model")):
        raise SsdbenchError(f"{drive['path']} is not the drive run {run_id} ran on")
    if [st.id for st in steps] != [s["key"] for s in run["steps"]]:
        raise SsdbenchError(f"run {run_id} ran another plan: resume it with its own suite")
    return resume_entry(run)


def cancel(data_dir):
    """Ask the active run to stop, and its repeat set if it is in one (or the active set, between two of its
    runs): a flag in the database, and SIGTERM to its process. Returns what was asked, e.g. "run 3"."""
    db = store.connect(data_dir)
    run = store.active_run(db)
    if run is not None:
        store.request_cancel(db, run["id"])
        place = store.repeat_of(db, run["id"])
        what, pid = f"run {run['id']}" + (f" and its repeat set {place[0]}" if place else ""), run["pid"]
    else:
        held = store.active_repeat(db)
        if held is None:
            raise SsdbenchError("no run is active")
        store.request_repeat_cancel(db, held["id"])
        what, pid = f"repeat set {held['id']}", held["pid"]
    pid = pid or read_lock(data_dir).get("pid")
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return what

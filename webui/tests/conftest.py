"""Shared fixtures and helpers: real loop devices, real fio, a real SQLite file in a temporary data folder,
the web app over it, and a run finished by the real engine.

Fixtures: `loopdev` (attach a sparse file as a loop device), `data_dir` (an empty data folder), `app`,
`client` and `token` (the web app on that folder, a test client, and its CSRF token once logged in),
`finished_run` (a data folder holding one run of the engine suite on a loop device, shared by a module),
`finished_bundle` (its bundle), `finished_repeat` (a repeat set of three engine-suite runs, shared by all),
`smoke_run` (one run of the smoke suite, shared by the session), `every_kind` (a data folder holding a run of
every kind, shared by a module), `small_partition` (a data folder on a small ext4 file system of its own) and
`postgres` (a real PostgreSQL for the session, which makes a fresh database).
Helpers: `ssdbench` (the real CLI in a child process), `start_run` (`ssdbench run` or `repeat` in the
background), `long_suite` (the engine suite with a step that lasts until stopped), `wait_for_step`,
`fio_status`, `vanish` (a loop device's drive taken away), `web_server` (the real `ssdbench web` on a free port),
`smoke_data` and `postgres_cluster` (the bodies of `smoke_run` and `postgres`, for the VM tests too),
`lab_server` (the real `ssdbench lab serve` on a free port), `lab` (an `ssdbench lab` command), `Browser` (a
login to the lab's pages over HTTP),
`show`, `wait_until`, `make_app`, `login`, `add_run` (a run written through the store, for pages that
need one without running fio) and `add_repeat` (a repeat set of such runs); `make_ca` (a CA of the test's own
and a server certificate it issued, with openssl) and `ntp_server` (a real chronyd serving this host's time).
Every app that make_app makes answers its test client through contract.ContractClient, and Browser reads a
lab's API the same way: each answer of the API is held to the document the server publishes."""

import contextlib
import fcntl
import hashlib
import http.cookiejar
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections import namedtuple
from types import SimpleNamespace

import pytest
from contract import ContractClient, assert_keeps

from ssdbench.errors import SsdbenchError
from ssdbench.results import bundle, store
from ssdbench.run import fio_output, quiet
from ssdbench.run.fio_output import Metric
from ssdbench.web import openapi

DATA = os.path.join(os.path.dirname(__file__), "data")
WEBUI = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Six short steps: the engine's behaviour without the time the whole smoke suite takes.
ENGINE_SUITE = ("--suite-file", os.path.join(DATA, "engine-suite.toml"), "--non-standard")
# 512 B transfer-size rows and trace IOs, for a drive of 4096 B logical blocks.
BLOCKS_SUITE = ("--suite-file", os.path.join(DATA, "blocks-suite.toml"), "--non-standard")


def data(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


# axe-core, the accessibility rules that the browser tests hold every page to (WCAG AA contrast): the npm
# registry's tarball at a pinned version, checked by its sha256, fetched at test time into the git-ignored
# tests/artifacts/ as fetch_uplot fetches uPlot, never committed.
AXE_VERSION = "4.10.2"
AXE_SHA256 = "9ea2d2d6917da998122bdacfd3b473e31ead53f4b87146c716a12edf89158100"


def axe_script():
    """The path of axe-core's axe.min.js, fetched on first use."""
    spec = importlib.util.spec_from_file_location("fetch_uplot", os.path.join(WEBUI, "fetch_uplot.py"))
    fetcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetcher)
    dest = os.path.join(WEBUI, "tests", "artifacts", "axe-core")
    fetcher.fetch(
        dest,
        url=f"https://registry.npmjs.org/axe-core/-/axe-core-{AXE_VERSION}.tgz",
        sha256=AXE_SHA256,
        files={"package/axe.min.js": "axe.min.js", "package/LICENSE": "axe.LICENSE"},
    )
    return os.path.join(dest, "axe.min.js")


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root for loop devices")


def attach(img, size=None, sector_size=None):
    """A loop device over the image file, made first as a sparse file of `size` when one is given; with
    `sector_size` (4096: a 4Kn drive), its logical blocks are that many bytes."""
    if size is not None:
        subprocess.run(["truncate", "-s", size, str(img)], check=True)
    sectors = ["--sector-size", str(sector_size)] if sector_size else []
    return subprocess.run(
        ["losetup", "-f", "--show", *sectors, str(img)], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def loopdev(tmp_path):
    """A fresh 512 MiB sparse file attached to a loop device (of 512 B logical blocks, unless asked)."""
    made = []

    def make(size="512M", name="disk.img", sector_size=None):
        img = tmp_path / name
        dev = attach(img, size, sector_size)
        made.append((dev, img))
        return dev, img

    yield make
    for dev, _ in made:
        # Only while it is still on a file of this test's (its own, or one the test gave it): a device the test
        # took away (vanish) may since hold another's.
        if (backing_file(dev) or "").startswith(f"{tmp_path}/"):
            subprocess.run(["losetup", "-d", dev], capture_output=True)


def backing_file(dev):
    """The file a loop device is attached to; None when it is attached to none."""
    try:
        with open(f"/sys/block/{os.path.basename(dev)}/loop/backing_file") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def wait_until(predicate, what, timeout=300):
    """Wait for a state, polling. The timeout only bounds a hang: it is far above the time the state
    takes even on a slow, busy machine, so reaching it means the state never came."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def web_server(data_dir, *args):
    """The real `ssdbench web` (waitress) on a free port of 127.0.0.1, with the test PIN: (process, port)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ssdbench.cli", "web", "--port", str(port), "--data-dir", str(data_dir), *args],
        env={**os.environ, "SSDBENCH_PIN": PIN},
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: answers(port), "the web server to listen")
        yield server, port
    finally:
        server.terminate()
        server.wait()


def ssdbench(*args, data_dir=None, env=None, check=False, **kw):
    """Run the real CLI in a child process, as a user would."""
    argv = [sys.executable, "-m", "ssdbench.cli", *args]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} failed ({proc.returncode}): {proc.stderr}")
    return proc


def show(run_id, data_dir):
    return json.loads(ssdbench("show", str(run_id), "--json", data_dir=data_dir, check=True).stdout)


def long_suite(folder, key):
    """The engine suite with its step `key` lasting 300 s instead of 3, for a test that acts while that step's
    fio runs: on a busy host, 3 s can be over before the test has seen the step start. The test ends the
    step long before its 300 s."""
    suite = folder / f"long-{key}.toml"
    with open(ENGINE_SUITE[1]) as f:
        head, step, tail = f.read().partition(f'id = "{key}"')
    suite.write_text(head + step + tail.replace("runtime = 3", "runtime = 300", 1))
    return ("--suite-file", str(suite), "--non-standard")


def start_run(dev, data_dir, *extra, suite=ENGINE_SUITE, command="run"):
    """Start `ssdbench run` (or `repeat`, its --times in `extra`) in the background, as a tester at the console
    would."""
    argv = [sys.executable, "-m", "ssdbench.cli", command, *suite, "--drive", dev, "--confirm", os.path.basename(dev)]
    argv += ["--data-dir", str(data_dir), *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def step_state(data_dir, key):
    """The state of the latest step `key` in the data folder, None before there is one."""
    if not os.path.exists(store.db_path(data_dir)):
        return None
    db = store.connect(data_dir)
    try:
        row = db.execute("SELECT state FROM steps WHERE key=? ORDER BY id DESC LIMIT 1", (key,)).fetchone()
    finally:
        db.close()
    return row and row[0]


def wait_for_step(data_dir, key, state="running"):
    wait_until(lambda: step_state(data_dir, key) == state, f"step {key} to be {state}")


def queue_files(dev):
    """The drive's files a run sets (the I/O scheduler, merges, the kernel's write cache): {name: what it holds},
    a choice file's chosen word."""
    queue = f"/sys/block/{os.path.basename(dev)}/queue"
    return {n: quiet._selected(open(f"{queue}/{n}").read().strip()) for n in ("scheduler", "nomerges", "write_cache")}


def set_queue_files(dev, **values):
    for name, value in values.items():
        with open(f"/sys/block/{os.path.basename(dev)}/queue/{name}", "w") as f:
            f.write(value)


def fio_status(step_dir):
    """The status documents fio has written so far in a step's folder."""
    try:
        return fio_output.fio_documents((step_dir / "fio.json").read_text())
    except FileNotFoundError:
        return []


# <linux/loop.h>: LOOP_GET_STATUS64 and LOOP_SET_STATUS64, and struct loop_info64's lo_offset (after lo_device,
# lo_inode and lo_rdevice, three u64) in its 232 bytes.
LOOP_GET_STATUS64, LOOP_SET_STATUS64 = 0x4C05, 0x4C04
LO_OFFSET = slice(24, 32)


def vanish(dev):
    """Take the drive away from under a loop device that fio is using, as a drive that dies or is pulled: one
    LOOP_SET_STATUS64 moves the device's start past the end of its file, so its size is 0 from one IO to the next
    (the kernel freezes the device's queue around the change). Truncating the file first and then telling the
    device left a gap in which fio's writes grew the file again (ENOSPC seen on a busy host)."""
    fd = os.open(dev, os.O_RDONLY)
    try:
        info = bytearray(232)
        fcntl.ioctl(fd, LOOP_GET_STATUS64, info)
        info[LO_OFFSET] = (1 << 62).to_bytes(8, sys.byteorder)
        # The kernel refuses the change while the device has pages in its cache (EAGAIN); fio's IO is direct.
        for _ in range(100):
            try:
                fcntl.ioctl(fd, LOOP_SET_STATUS64, bytes(info))
                break
            except BlockingIOError:
                subprocess.run(["blockdev", "--flushbufs", dev], check=True)
        else:
            raise AssertionError(f"{dev}: the kernel kept refusing to change its offset")
    finally:
        os.close(fd)
    # A busy loop device only detaches on last close.
    subprocess.run(["losetup", "-d", dev], check=True)


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def app(data_dir):
    return make_app(data_dir)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def token(client):
    return login(client)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One finished engine-suite run (about 15 s), shared by a module: (data folder, loop device)."""
    top = tmp_path_factory.mktemp("finished")
    dev = attach(top / "drive.img", "512M")
    data_dir = top / "data"
    try:
        ssdbench(
            "run", *ENGINE_SUITE, "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir, check=True
        )
        yield data_dir, dev
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def cgroup2():
    """Where cgroup v2 is mounted (/sys/fs/cgroup on a host of v2 alone, /sys/fs/cgroup/unified beside v1's
    hierarchies), or None."""
    mounts = (line.split() for line in read_text("/proc/self/mounts").splitlines())
    return next((fields[1] for fields in mounts if fields[2] == "cgroup2"), None)


class BlockThrottle:
    """A cgroup of its own in which a process reads or writes `dev` at no more than `rate` IOs (per="iops") or
    bytes (per="bps") a second (the kernel's block throttle): a slow drive made of a fast one. cgroup v1's blkio
    controller, or cgroup v2's io controller, whichever is mounted. Never a skip: the tests that use it are proofs,
    and every host here has one. `join` is a preexec_fn that moves a child into it; `limit` sets another rate."""

    def __init__(self, dev, rate, what="write", per="iops"):
        rdev = os.stat(dev).st_rdev
        self.device = f"{os.major(rdev)}:{os.minor(rdev)}"
        v1, v2 = "/sys/fs/cgroup/blkio", cgroup2()
        if os.path.exists(f"{v1}/blkio.throttle.{what}_{per}_device"):
            self.root, self.file, self.line = v1, f"blkio.throttle.{what}_{per}_device", "{device} {rate}"
        elif v2 and "io" in read_text(f"{v2}/cgroup.controllers").split():
            with contextlib.suppress(OSError):
                write_text(f"{v2}/cgroup.subtree_control", "+io")
            self.root, self.file, self.line = v2, "io.max", f"{{device}} {what[0]}{per}={{rate}}"
        else:
            pytest.fail("no block throttle here: neither cgroup v1's blkio nor cgroup v2's io controller")
        self.path = tempfile.mkdtemp(prefix="ssdbench-test-", dir=self.root)
        self.limit(rate)

    def limit(self, rate):
        write_text(os.path.join(self.path, self.file), self.line.format(device=self.device, rate=rate))

    def join(self):
        write_text(os.path.join(self.path, "cgroup.procs"), str(os.getpid()))

    def remove(self):
        # none once its run has ended; a process left over (a test that failed meanwhile) goes back to the root
        for pid in read_text(os.path.join(self.path, "cgroup.procs")).split():
            write_text(os.path.join(self.root, "cgroup.procs"), pid)
        os.rmdir(self.path)


@contextlib.contextmanager
def throttled(dev, rate, what="write", per="iops"):
    """A BlockThrottle while the context lasts: yields its preexec_fn."""
    throttle = BlockThrottle(dev, rate, what, per)
    try:
        yield throttle.join
    finally:
        throttle.remove()


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


@contextlib.contextmanager
def smoke_data(folder):
    """A data folder in `folder` holding one run (run 1) of the smoke suite (every step type) on a 3 GiB loop
    device, attached while the context lasts."""
    # The whole-drive fill must last several of the 1 s between bandwidth and histogram samples (fio logs whole
    # intervals only). Its size alone cannot promise that: a fast host fills 3 GiB of a loop device in under a
    # second. Writes held to 512 MiB/s make it at least 6 s, and leave the smoke run's other writes unhindered.
    dev = attach(folder / "disk.img", "3G")
    try:
        data_dir = folder / "data"
        with throttled(dev, 512 << 20, per="bps") as join:
            proc = ssdbench(
                "run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev),
                data_dir=data_dir, preexec_fn=join,
            )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        yield data_dir
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One run of the smoke suite on a 3 GiB loop device (smoke_data), shared by the session: (the run as
    `ssdbench show` gives it, its data folder)."""
    with smoke_data(tmp_path_factory.mktemp("smoke")) as data_dir:
        yield show(1, data_dir), data_dir


@pytest.fixture(scope="session")
def finished_repeat(tmp_path_factory):
    """One finished repeat set of the engine suite, three runs (about 45 s), shared by every module that needs one:
    (data folder, loop device, the summary that `ssdbench repeat --json` printed)."""
    top = tmp_path_factory.mktemp("repeat")
    dev = attach(top / "drive.img", "512M")
    data_dir = top / "data"
    try:
        proc = ssdbench(
            "repeat",
            *ENGINE_SUITE,
            "--times",
            "3",
            "--drive",
            dev,
            "--confirm",
            os.path.basename(dev),
            "--json",
            data_dir=data_dir,
            check=True,
        )
        yield data_dir, dev, json.loads(proc.stdout)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture
def small_partition(tmp_path, loopdev):
    """A data folder on a file system of its own, of `size`, made as SSDB-DATA is (ext4, 4 KiB blocks, none
    kept for root) on a loop device and mounted: make(size) returns its path."""
    mounts = []

    def make(size):
        dev, _ = loopdev(size, name=f"partition{len(mounts)}.img")
        subprocess.run(["mkfs.ext4", "-q", "-b", "4096", "-m", "0", dev], check=True)
        mnt = tmp_path / f"partition{len(mounts)}"
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        mounts.append(mnt)
        return mnt

    yield make
    for mnt in mounts:
        if subprocess.run(["umount", str(mnt)]).returncode:
            subprocess.run(["umount", "-l", str(mnt)])


PIN = "424242"
# The metrics by which rules 1 and 9 judge the host (each job's CPU and host share, each step's CPU wait): a busy
# machine sets them on one run of a set and not on the next.
JUDGED = ("host_share_percent", "host.cpu_wait_percent", "usr_cpu", "sys_cpu")
XSS = "<img src=x onerror=alert(1)>"
# What store.create_run reads of a plan step; the engine's PlanStep has more.
Step = namedtuple("Step", "index id kind title estimate_s job_file")


@pytest.fixture(scope="module")
def finished_bundle(finished_run, tmp_path_factory):
    """The finished run's bundle, written by the CLI: its path."""
    data_dir, _ = finished_run
    out = tmp_path_factory.mktemp("bundle")
    path = ssdbench("bundle", "1", "-o", str(out), data_dir=data_dir, check=True).stdout.strip()
    return path


# The runs of the every_kind data folder, by what each is: {kind: run id}.
EVERY_KIND = {"smoke": 1, "imported": 2, "imported repeat": 3, "cancelled": 6, "failed": 7, "queued": 8}


@pytest.fixture(scope="module")
def every_kind(smoke_run, finished_bundle, finished_repeat, tmp_path_factory):
    """A data folder holding a run of every kind, each made by the current engine, CLI and web app, shared by a
    module (about 20 s besides the session's smoke run and repeat set): (data folder, the loop device whose runs
    it holds, still attached). Its runs are EVERY_KIND's: 1 the smoke run (every step type: latency
    histograms, a trace, a Mixed Burst); 2 the finished run's bundle, imported; 3 to 5 the finished repeat set's
    bundle, imported (repeat set 1); 6 the one run of repeat set 2, cancelled while fio ran; 7 a run whose drive
    vanished while fio ran, its step failed; 8 a run queued through the API, which no runner takes."""
    top = tmp_path_factory.mktemp("every-kind")
    data_dir = top / "data"
    shutil.copytree(smoke_run[1], data_dir)
    repeat_data, _, repeat_summary = finished_repeat
    repeat_bundle = ssdbench(
        "bundle", "--repeat", str(repeat_summary["id"]), "-o", str(top), data_dir=repeat_data, check=True
    ).stdout.strip()
    ssdbench("import", finished_bundle, repeat_bundle, data_dir=data_dir, check=True)
    # rand-read-4k lasts until it is stopped: the cancel and the vanished drive each come while its fio reads.
    suite = long_suite(top, "rand-read-4k")
    attached = [attach(top / "drive.img", "512M"), attach(top / "doomed.img", "512M")]
    dev, doomed = attached
    try:
        cancelled = start_run(dev, data_dir, "--times", "2", suite=suite, command="repeat")
        wait_until(lambda: fio_reads(data_dir, EVERY_KIND["cancelled"]), "fio to read in the run to cancel")
        ssdbench("cancel", data_dir=data_dir, check=True)
        assert cancelled.wait(timeout=120) == 1, cancelled.communicate()
        failed = start_run(doomed, data_dir, suite=suite)
        wait_until(lambda: fio_reads(data_dir, EVERY_KIND["failed"]), "fio to read in the run to fail")
        vanish(doomed)
        attached.remove(doomed)  # its number is free for another loop device now
        assert failed.wait(timeout=120) == 1, failed.communicate()
        client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
        body = {"drive": dev, "suite": "smoke", "confirm": os.path.basename(dev), "destroy_data": True}
        queued = client.post("/api/runs", json=body, headers={"X-CSRF-Token": login(client)})
        assert queued.get_json() == {"id": EVERY_KIND["queued"], "url": f"/runs/{EVERY_KIND['queued']}"}
        yield data_dir, dev
    finally:
        for each in attached:
            subprocess.run(["losetup", "-d", each], capture_output=True)


def fio_reads(data_dir, run_id):
    """Whether fio has read in the rand-read-4k step of the engine suite's run `run_id`."""
    step_dir = data_dir / store.step_folder(run_id, 2, "rand-read-4k")
    return any(d["jobs"][0]["read"]["io_bytes"] for d in fio_status(step_dir))


def db_files(data_dir):
    return {
        name: hashlib.sha256(open(os.path.join(data_dir, name), "rb").read()).hexdigest()
        for name in os.listdir(data_dir)
        if name.startswith(store.DB_NAME) and not name.endswith("-shm")
    }


def make_app(data_dir, **config):
    from ssdbench.web import create_app

    app = create_app({"SSDBENCH_DATA_DIR": str(data_dir), "SSDBENCH_PIN": PIN, "TESTING": True, **config})
    app.test_client_class = ContractClient  # every answer of the API held to its document
    return app


def login(client):
    """Log the client in through the API; returns the session's CSRF token."""
    token = client.get("/api/session").get_json()["csrf_token"]
    response = client.post("/api/login", json={"pin": PIN}, headers={"X-CSRF-Token": token})
    assert response.status_code == 200, response.get_json()
    return response.get_json()["csrf_token"]


def add_repeat(data_dir, iops=(98765.4321, 98765.4321), state="done", model="Fast SSD 1TB"):
    """A repeat set of add_run's runs, one a value of `iops`, each done, or the set `running` between two runs."""
    db = store.connect(data_dir)
    suite = SimpleNamespace(name="standard", sha256="a" * 64, locked=True)
    drive = {"path": "/dev/nvme0n1", "model": model, "serial": "S123", "capacity_bytes": 10**12, "transport": "nvme"}
    thresholds = {"cov_percent": 2.5, "qd1_latency_cov_percent": 3.0}
    repeat_id = store.create_repeat(db, drive, suite, max(2, len(iops)), thresholds, {"device": drive["path"]})
    for position, value in enumerate(iops, 1):
        add_run(data_dir, model=model, iops=value, repeat=(repeat_id, position))
    if state != "running":
        store.finish_repeat(db, repeat_id, state)
    db.close()
    return repeat_id


def add_run(
    data_dir,
    state="done",
    model="Fast SSD 1TB",
    serial="S123",
    suite_hash="a" * 64,
    points=20,
    link=None,
    iops=98765.4321,
    repeat=None,
):
    """A run as the engine leaves it: a fill, a measured step (of `iops` read IOPS), a consistency step, a sweep,
    a temperature. The drive's `link` (none: unknown, as for a loop device) is what its read of 404.5 MB/s is
    checked against; `repeat` (set id, position) places it in a repeat set."""
    db = store.connect(data_dir)
    drive = {
        "path": "/dev/nvme0n1",
        "model": model,
        "serial": serial,
        "firmware": "1.0",
        "capacity_bytes": 10**12,
        "transport": "nvme",
        "link": link,
    }
    suite = SimpleNamespace(name="standard", sha256=suite_hash, locked=True)
    steps = [
        Step(0, "seq-fill", "fio", "Sequential fill", 10.0, "[seq-fill]\nrw=write\n"),
        Step(1, "rand-read-4k", "fio", "4K random read, QD3", 3.0, "[rand-read-4k]\nrw=randread\n"),
        Step(2, "consistency", "fio", "Consistency", 2000.0, "[consistency]\nrw=randwrite\n"),
        Step(3, "sweep-clean", "sweep", "Zone sweep, clean", 5.0, None),
    ]
    run_id = store.create_run(db, drive, suite, steps, state="running", repeat=repeat)
    store.add_series(
        db, run_id, None, "temperature", "°C", "hwmon:/x", [(i * 1000, 40.0 + i % 3) for i in range(points)]
    )
    ms = [(i * 1000, 1000.0 + i) for i in range(points)]
    results = [
        (
            [Metric("write.mb_s", 1234.56789012345, "MB/s", "/jobs/0/write/bw_bytes / 1e6")],
            [("write.bw", "KiB/s", "seq-fill_bw.1.log:direction=1", ms)],
        ),
        (
            [
                Metric("read.iops", iops, "IOPS", "/jobs/0/read/iops"),
                Metric("read.bw", 404.5e6, "B/s", "/jobs/0/read/bw_bytes"),
                Metric("read.mb_s", 404.5, "MB/s", "/jobs/0/read/bw_bytes / 1e6"),
                Metric("read.lat_p99", 123456.0, "ns", "/jobs/0/read/lat_ns/percentile/99.000000"),
            ],
            [("read.iops", "IOPS", "rand-read-4k_iops.1.log:direction=0", ms)],
        ),
        (
            [Metric("steady.avg_iops", 5000.25, "IOPS", "mean of fio's write.iops log for t >= 1400 s")],
            [("write.iops", "IOPS", "consistency_iops.1.log:direction=1", ms)],
        ),
        (
            [Metric("write.avg_mb_s", 300.0, "MB/s", "mean over zones")],
            [("write.mb_s", "MB/s", "fio.json", [(i * 2**30, 300.0 + i) for i in range(4)], "offset")],
        ),
    ]
    for idx, (metrics, series) in enumerate(results):
        sid = store.start_step(db, run_id, idx, f"runs/{run_id}/{idx:02d}")
        store.finish_step(db, sid, "done", metrics=metrics, series=series)
    store.update_progress(db, run_id, 3, 42.5, 1234.0, 5000.0, 20.48e6)
    if state == "queued":
        db.execute("UPDATE runs SET state='queued', started_at=NULL WHERE id=?", (run_id,))
    elif state != "running":
        store.finish_run(db, run_id, state, None if state == "done" else f"the run ended {state}")
    db.close()
    return run_id


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL for the session (postgres_cluster). Yields make(), which creates a fresh database and
    returns its URL."""
    with postgres_cluster() as make:
        yield make


@contextlib.contextmanager
def postgres_cluster():
    """A real PostgreSQL while the context lasts (Debian's postgresql package, lab/cluster): initdb and pg_ctl
    in a temporary folder, on a unix socket there, run as `nobody` when the tests run as root. Gives make(),
    which creates a fresh database and returns its URL; skips the test without PostgreSQL."""
    from ssdbench.lab import cluster

    top = tempfile.mkdtemp(prefix="ssdbench-pg-")  # not under pytest's folder, which nobody cannot enter
    try:
        pg = cluster.Cluster(top)
    except SsdbenchError as exc:
        pytest.skip(str(exc))
    pg.start()
    made = []

    def make():
        made.append(pg.create(f"lab{len(made)}"))
        return made[-1]

    try:
        yield make
    finally:
        pg.stop()
        shutil.rmtree(top, ignore_errors=True)


@contextlib.contextmanager
def lab_server(db_url, store_dir, port=None, options=()):
    """The real `ssdbench lab serve` (gunicorn) on a free port of 127.0.0.1: (process, base URL). The process
    leads a session of its own, with its workers: os.killpg(process.pid, SIGKILL) kills the whole server."""
    port = port or free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ssdbench.cli", "lab", "serve", "--db", db_url, "--store", str(store_dir)]
        + ["--port", str(port), *options],
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: answers(port) or server.poll() is not None, "the lab server to listen")
        assert server.poll() is None, "the lab server did not start"
        yield server, f"http://127.0.0.1:{port}"
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait()


@pytest.fixture
def lab_db(postgres):
    """A fresh, migrated lab database: its URL."""
    url = postgres()
    assert lab("migrate", db=url).returncode == 0
    return url


def rows(db, sql, *params):
    """The rows a query gives on the lab database at URL `db`."""
    import psycopg

    with psycopg.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def lab(*args, db):
    """An `ssdbench lab` command on the lab database at URL `db`, in a child process."""
    return ssdbench("lab", *args, "--db", db)


def two_appliances(lab_db, finished_bundle, tmp_path, url):
    """The finished run from appliance bench-a, and another run (written through the store) from bench-b, both
    trusted, uploaded to the lab at `url`: {appliance: its token}."""
    other = tmp_path / "other"
    add_run(other, model="Other SSD 2TB", serial="B456")
    second = ssdbench("bundle", "1", "-o", str(tmp_path), data_dir=other, check=True).stdout.strip()
    tokens = {}
    for name, path in (("bench-a", finished_bundle), ("bench-b", second)):
        tokens[name] = lab("token", "add", name, db=lab_db).stdout.strip()
        lab("token", "trust", name, db=lab_db)
        ssdbench("upload", path, "--to", url, "--token", tokens[name], check=True)
    return tokens


def rewritten(path, out, change, compression=zipfile.ZIP_STORED, manifest_change=dict):
    """A copy of a bundle whose members pass through change(name, bytes) -> bytes (None drops one); the
    manifest, passed through manifest_change(dict) -> dict, lists the new hashes, plus any member change(None, None)
    returns as {name: bytes}."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", compression) as dst:
        manifest = manifest_change(json.loads(src.read(bundle.MANIFEST)))
        members = {n: change(n, src.read(n)) for n in src.namelist() if n != bundle.MANIFEST}
        members.update(change(None, None) or {})
        for name, content in members.items():
            if content is not None:
                dst.writestr(name, content)
                manifest["files"][name] = hashlib.sha256(content).hexdigest()
        dst.writestr(bundle.MANIFEST, json.dumps(manifest))
    return str(out)


def login_from(url, user, password, forwarded):
    """A login through the form, the request carrying X-Forwarded-For as a proxy adds it: its HTTP status."""
    browser = Browser(url)
    browser.opener.addheaders = [("X-Forwarded-For", forwarded)]
    return browser.login(user, password)[0]


class Browser:
    """Plain HTTP with cookies, as a browser logs in: the form's CSRF token, then the session cookie."""

    def __init__(self, url):
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def get(self, path):
        """(status, the URL it landed on, the body); an answer of the lab's API is held to the lab's document."""
        try:
            with self.opener.open(self.url + path) as response:
                status, url, headers, body = response.status, response.geturl(), response.headers, response.read()
        except urllib.error.HTTPError as exc:
            status, url, headers, body = exc.code, exc.url, exc.headers, exc.read()
        path = urllib.parse.urlsplit(url).path
        assert_keeps(openapi.LAB_DOCUMENT, "GET", path, status, headers.get_content_type(), body)
        return status, url, body.decode()

    def login(self, user, password):
        _, _, page = self.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)[1]
        form = urllib.parse.urlencode({"user": user, "password": password, "csrf_token": csrf}).encode()
        try:
            with self.opener.open(self.url + "/login", data=form) as response:
                return response.status, response.geturl()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.url


def make_ca(folder, name):
    """A CA of the test's own, and a certificate it issued to the server `name` (a host name or an IPv4
    address), made with openssl: (the CA's certificate, the server's certificate, its key), PEM files."""
    ca_key, ca, key, csr, cert, ext = (
        os.path.join(folder, n) for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem", "server.ext")
    )
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    for argv in (
        ("req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=ssdbench test CA"),
        ("req", *ec, "-keyout", key, "-out", csr, "-subj", f"/CN={name}"),
    ):
        subprocess.run(
            ["openssl", *argv, "-addext", "keyUsage=critical,keyCertSign,digitalSignature"],
            check=True,
            capture_output=True,
        )
    san = f"IP:{name}" if re.fullmatch(r"[0-9.]+", name) else f"DNS:{name}"
    with open(ext, "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
        f.write("subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    subprocess.run(
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert]
        + ["-days", "2", "-extfile", ext],
        check=True,
        capture_output=True,
    )
    return ca, cert, key


@contextlib.contextmanager
def ntp_server(folder, address="127.0.0.1", port=123, wrap=()):
    """A real NTP server while the context lasts: chronyd (Debian's chrony) serving this host's clock on
    address:port, never setting it (-x). `wrap`: a command to start it in, such as `ip netns exec NS`."""
    if not shutil.which("chronyd"):
        pytest.skip("no chronyd: apt-get install chrony")
    conf = os.path.join(folder, "chrony.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbindaddress {address}\nallow all\nlocal stratum 8\ncmdport 0\n")
        f.write(f"pidfile {folder}/chronyd.pid\n")
    server = subprocess.Popen(
        [*wrap, "chronyd", "-x", "-d", "-u", "root", "-f", conf], stderr=subprocess.PIPE, text=True
    )
    try:
        # chronyd says "Running with root privileges" once it has read its configuration and bound its socket.
        for line in server.stderr:
            if "Running with root privileges" in line:
                break
        assert server.poll() is None, "chronyd did not start"
        yield server
    finally:
        server.terminate()
        server.communicate(timeout=60)

"""The runner service: runs queued through the web API, executed by `ssdbench runner` in a process of its own."""

import os
import re
import subprocess
import sys
import time

import pytest
from conftest import add_run, login, make_app, needs_root, queue_files, set_queue_files, ssdbench, wait_until

from ssdbench.results import store
from ssdbench.run import quiet

pytestmark = needs_root()


@pytest.fixture
def runner_service():
    """Start `ssdbench runner` on a data directory; stopped (SIGTERM while idle) at the end."""
    started = []

    def start(data_dir):
        proc = subprocess.Popen(
            [sys.executable, "-m", "ssdbench.cli", "runner", "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(data_dir, what, timeout=90):
    """Poll the store until what(db) is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        db = store.connect(data_dir)
        try:
            if what(db):
                return
        finally:
            db.close()
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what.__doc__ or what}")


def state_is(run_id, state):
    def check(db):
        return store.run_state(db, run_id) == state

    check.__doc__ = f"run {run_id} to be {state}"
    return check


def test_service_takes_queued_runs_survives_a_failing_one_and_stops_on_cancel(loopdev, tmp_path, runner_service):
    good, _ = loopdev()
    bad, bad_img = loopdev(name="bad.img")
    data_dir = tmp_path / "data"
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[good, bad]).test_client()
    headers = {"X-CSRF-Token": login(client)}

    def start(dev):
        return client.post(
            "/api/runs", json={"drive": dev, "suite": "smoke", "confirm": os.path.basename(dev)}, headers=headers
        )

    assert start(bad).status_code == 201
    # Between queueing and starting, the drive loses its medium: the service must check again.
    subprocess.run(["truncate", "-s", "0", str(bad_img)], check=True)
    subprocess.run(["losetup", "-c", bad], check=True)
    # And a run left running by a process that died, as after a power cut.
    orphan = add_run(data_dir, state="running")

    service = runner_service(data_dir)
    wait_for(data_dir, state_is(1, "failed"))
    run = store.get_run(store.connect(data_dir), 1)
    assert "is not a valid target: has no medium" in run["error"]
    assert {s["state"] for s in run["steps"]} == {"skipped"}
    assert store.run_state(store.connect(data_dir), orphan) == "interrupted"

    # The service is still there: the next run is taken, and it holds the lock the console's run uses.
    assert start(good).status_code == 201
    wait_for(data_dir, state_is(3, "running"))
    console = ssdbench(
        "run", "--suite", "smoke", "--drive", good, "--confirm", os.path.basename(good), data_dir=data_dir
    )
    assert console.returncode == 2 and "another run is active (run 3" in console.stderr
    assert client.get("/api/runs/3/progress").get_json()["state"] == "running"

    def measuring(db):
        """run 3 to reach its third step"""
        return (db.execute("SELECT step_index FROM runs WHERE id=3").fetchone()[0] or 0) >= 2  # None: no step yet

    wait_for(data_dir, measuring)
    assert client.post("/api/runs/3/cancel", headers=headers).status_code == 202
    wait_for(data_dir, state_is(3, "cancelled"), timeout=60)
    run = store.get_run(store.connect(data_dir), 3)
    states = [s["state"] for s in run["steps"]]
    assert states[:2] == ["done", "done"] and "cancelled" in states and states[-1] == "skipped"
    assert run["environment"]["drive"]["path"] == good
    assert service.poll() is None, service.stderr.read()


def test_service_checks_the_room_again_when_it_takes_a_queued_run(loopdev, small_partition, runner_service):
    """Room enough when the run was queued, none when the service takes it: the run fails before it starts,
    naming the room it needs and the room there is, and nothing is written to the drive."""
    dev, img = loopdev()
    data_dir = small_partition("32M")
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
    body = {"drive": dev, "suite": "smoke", "confirm": os.path.basename(dev)}
    assert client.post("/api/runs", json=body, headers={"X-CSRF-Token": login(client)}).status_code == 201
    # Filled up, less 2 MiB: room for the service to record the run, not for its results.
    subprocess.run(["dd", "if=/dev/zero", f"of={data_dir / 'filler'}", "bs=1M"], capture_output=True)
    subprocess.run(["truncate", "-s", "-2M", str(data_dir / "filler")], check=True)
    runner_service(data_dir)
    wait_for(data_dir, state_is(1, "failed"))
    run = store.get_run(store.connect(data_dir), 1)
    assert run["error"].startswith("not enough room for the results: smoke on this drive needs "), run["error"]
    free = re.search(rf"and the data partition \({re.escape(str(data_dir))}\) has ([0-9.]+) MB free", run["error"])
    assert free and float(free.group(1)) < 3, run["error"]  # the 2 MiB left, and what SQLite gave back
    assert {s["state"] for s in run["steps"]} == {"skipped"} and os.stat(img).st_blocks == 0


def test_a_repeat_queued_from_the_web_runs_one_run_after_another_and_its_cancel_stops_the_set(
    loopdev, tmp_path, runner_service
):
    dev, _ = loopdev("128M")
    data_dir = tmp_path / "data"
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
    headers = {"X-CSRF-Token": login(client)}
    start = {"drive": dev, "suite": "smoke", "confirm": os.path.basename(dev)}
    made = client.post("/api/repeats", json={**start, "times": 3}, headers=headers)
    assert made.status_code == 201 and made.get_json() == {"id": 1, "url": "/repeats/1"}
    held = client.get("/api/repeats/1").get_json()
    assert held["state"] == "queued" and [(r["position"], r["state"]) for r in held["runs"]] == [(1, "queued")]
    assert client.post("/api/runs", json=start, headers=headers).status_code == 409

    service = runner_service(data_dir)

    def second_run_running(db):
        """the set's second run to be running (its idle before it, or its calibration: a cancel stops either)"""
        return db.execute(
            """SELECT 1 FROM runs JOIN repeat_runs ON repeat_runs.run_id = runs.id
               WHERE repeat_runs.repeat_id = 1 AND repeat_runs.position = 2 AND runs.state = 'running'"""
        ).fetchone()

    # The first run ends done, and the service starts the second under the same lock: a console run is refused.
    wait_for(data_dir, second_run_running, timeout=900)
    held = client.get("/api/repeats/1").get_json()
    assert held["state"] == "running" and [(r["position"], r["state"]) for r in held["runs"]] == [
        (1, "done"),
        (2, "running"),
    ]
    assert held["counted"] == [1] and held["figures"] and {f["n"] for f in held["figures"]} == {1}
    console = ssdbench("run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir)
    assert console.returncode == 2 and "another run is active (run 2" in console.stderr

    # Cancelling the set stops its run in progress, and no third run starts.
    assert client.post("/api/repeats/1/cancel", headers=headers).status_code == 202

    def set_ended(db):
        """the repeat set to end"""
        return store.repeat_state(db, 1) not in store.ACTIVE

    wait_for(data_dir, set_ended, timeout=120)
    held = client.get("/api/repeats/1").get_json()
    assert held["state"] == "cancelled" and held["error"].startswith("run 2 (2 of 3) ended cancelled")
    assert [(r["position"], r["state"]) for r in held["runs"]] == [(1, "done"), (2, "cancelled")]
    assert [r["id"] for r in client.get("/api/runs").get_json()["runs"]] == [2, 1]  # newest first
    assert client.post("/api/repeats/1/cancel", headers=headers).status_code == 409
    assert service.poll() is None, service.stderr.read()


def test_a_run_cut_off_resumes_from_the_web_after_its_question_and_a_cancelled_resume_leaves_it_to_resume(
    loopdev, tmp_path, runner_service
):
    """The runner service killed as it prepares a run, as a crash or a power cut; the run page offers to resume it,
    on a page that names the step it starts again from and the drive it destroys and takes the drive's ID; the
    service resumes it from its purge. A resume cancelled before it began leaves the run interrupted, to resume
    later. (A run killed in a step, and its steps run again, is test_runner's: the resume is the same.)"""
    dev, _ = loopdev("128M")
    data_dir = tmp_path / "data"
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
    token = login(client)
    headers = {"X-CSRF-Token": token}
    body = {"drive": dev, "suite": "smoke", "confirm": os.path.basename(dev)}
    assert client.post("/api/runs", json=body, headers=headers).status_code == 201
    service = runner_service(data_dir)

    wait_for(data_dir, state_is(1, "running"))
    service.kill()  # as a crash would: the run is left running
    service.wait()
    cut = store.get_run(store.connect(data_dir), 1)
    assert cut["state"] == "running" and client.get("/runs/1/resume").status_code == 200
    # Until a service (or a console run) marks it interrupted under the run lock, nothing resumes it.
    assert "Resume this run" not in client.get("/runs/1").data.decode()
    assert client.post("/api/runs/1/resume", json={"confirm": body["confirm"]}, headers=headers).status_code == 409
    service = runner_service(data_dir)
    wait_for(data_dir, state_is(1, "interrupted"))
    service.terminate()
    service.wait()
    cut_at = store.get_run(store.connect(data_dir), 1)["finished_at"]

    page = client.get("/runs/1").data.decode()
    assert 'href="/runs/1/resume"' in page and "Resume this run" in page
    question = " ".join(client.get("/runs/1/resume").data.decode().split())
    assert "It starts again at step 1, Purge" in question and f"now at {dev}" in question
    assert f"<code>{os.path.basename(dev)}</code>" in question  # the ID to type
    wrong = client.post("/runs/1/resume", data={"confirm": "nope", "csrf_token": token})
    assert wrong.status_code == 409 and f"Type {os.path.basename(dev)} exactly" in wrong.data.decode()
    assert store.run_state(store.connect(data_dir), 1) == "interrupted"

    # Queued with no service to take it, then cancelled: the service finds it cancelled and leaves it interrupted.
    queued = client.post("/runs/1/resume", data={"confirm": body["confirm"], "csrf_token": token})
    assert queued.status_code == 302 and queued.headers["Location"].endswith("/runs/1")
    run = store.get_run(store.connect(data_dir), 1)
    assert run["state"] == "queued" and run["request"]["resume"] is True
    assert client.post("/api/runs", json=body, headers=headers).status_code == 409  # one run at a time
    assert client.post("/api/runs/1/cancel", headers=headers).status_code == 202
    service = runner_service(data_dir)

    def left_to_resume(db):
        """the cancelled resume to leave run 1 interrupted"""
        return store.run_state(db, 1) == "interrupted" and "not resumed" in (store.get_run(db, 1)["error"] or "")

    wait_for(data_dir, left_to_resume)
    run = store.get_run(store.connect(data_dir), 1)
    assert run["error"] == "not resumed: cancelled before it started" and not (run["environment"] or {}).get("resumed")

    # Through the API this time; the service resumes it from its purge, the first step, then a cancel ends it.
    resumed = client.post("/api/runs/1/resume", json={"confirm": body["confirm"]}, headers=headers)
    assert resumed.status_code == 202 and resumed.get_json() == {"id": 1, "url": "/runs/1", "from_step": "purge"}

    def resumed_running(db):
        """run 1 to be resumed, and running"""
        run = store.get_run(db, 1)
        # the environment is written once the run has claimed the drive: None until then
        return run["state"] == "running" and (run["environment"] or {}).get("resumed")

    wait_for(data_dir, resumed_running)
    assert client.post("/api/runs/1/cancel", headers=headers).status_code == 202
    wait_for(data_dir, state_is(1, "cancelled"), timeout=120)
    run = store.get_run(store.connect(data_dir), 1)
    [entry] = run["environment"]["resumed"]
    assert (entry["cut_step"], entry["from_step"], entry["from_step_index"]) == ("purge", "purge", 0)
    assert entry["cut_at"] == cut_at and run["started_at"] == cut["started_at"]  # the run's own times, not the resume's
    assert service.poll() is None, service.stderr.read()


def test_a_trace_uploaded_on_the_web_plays_through_the_queue_and_is_non_standard_everywhere(
    loopdev, data_dir, runner_service
):
    """Upload a trace, start it on a drive with the usual confirmation, let the runner service play it: the
    run, its page, its bundle and compare all say it is the tester's own trace, not a standard run."""
    import io
    import json
    import zipfile

    dev, _ = loopdev("128M")
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
    headers = {"X-CSRF-Token": login(client)}
    with open(os.path.join(os.path.dirname(__file__), "data", "traces", "msr-handmade.csv")) as f:
        text = f.read()
    imported = client.post("/api/traces", json={"format": "csv", "text": text, "name": "msr"}, headers=headers)
    assert imported.status_code == 201, imported.get_json()
    entry = imported.get_json()
    assert entry["name"] == "msr" and entry["stats"]["reads"] == 7
    assert client.get("/api/traces").get_json() == {"traces": [entry], "problems": []}
    body = {"drive": dev, "confirm": "not-the-id"}
    wrong = client.post("/api/traces/msr/runs", json=body, headers=headers)
    assert wrong.status_code == 409 and f"Type {os.path.basename(dev)} exactly" in wrong.get_json()["error"]
    body["confirm"] = os.path.basename(dev)
    started = client.post("/api/traces/msr/runs", json=body, headers=headers)
    assert started.status_code == 201 and started.get_json() == {"id": 1, "url": "/runs/1"}
    queued = store.get_run(store.connect(data_dir), 1)
    assert (queued["suite"], queued["standard"], queued["request"]["trace"]) == ("user-trace", 0, "msr")
    runner_service(data_dir)
    wait_for(data_dir, state_is(1, "done"), timeout=300)
    run = client.get("/api/runs/1").get_json()
    trace = run["steps"][-1]["detail"]["trace"]
    assert trace["name"] == "msr" and trace["sha256"] == entry["sha256"] and trace["synthetic"] is False
    played = run["steps"][-1]["title"]
    own = f"{played} plays the tester's own trace msr (sha256 {entry['sha256']}), not a standard trace"
    assert own in " ".join(run["warnings"]) and any("non-standard suite" in w for w in run["warnings"])
    assert b"plays the tester&#39;s own trace msr" in client.get("/runs/1").data
    bundle = zipfile.ZipFile(io.BytesIO(client.get("/api/runs/1/bundle").data))
    manifest, result = (json.loads(bundle.read(name)) for name in ("manifest.json", "result.json"))
    assert manifest["suite"]["standard"] is False and manifest["suite"]["name"] == "user-trace"
    assert own in " ".join(result["warnings"])
    assert "raw/02-trace/fio-00.json" in bundle.namelist() and "raw/02-trace/seg0000.replay.gz" in bundle.namelist()
    other = add_run(data_dir)
    compared = client.get(f"/api/compare?run=1&run={other}").get_json()
    assert not compared["comparable"] and own in " ".join(compared["runs"][0]["warnings"])
    assert b"plays the tester&#39;s own trace msr" in client.get(f"/compare?run=1&run={other}").data


# A runner that dies with the controls applied: os._exit, so that no restore, no finally, runs.
DIES_CHANGED = """
import os, sys
from ssdbench.run import quiet
drive = {"path": sys.argv[1], "transport": "loop", "host_controller": None}
quiet.Quiet(drive, quiet.Record(sys.argv[2], 9, drive)).apply()
print(os.getpid(), flush=True)
os._exit(9)
"""


def test_the_service_puts_back_what_a_killed_run_changed_as_it_starts(loopdev, tmp_path, runner_service):
    dev, _ = loopdev("64M")
    set_queue_files(dev, scheduler="mq-deadline", nomerges="0", write_cache="write through")
    found = queue_files(dev)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    died = subprocess.run([sys.executable, "-c", DIES_CHANGED, dev, str(data_dir)], capture_output=True, text=True)
    assert died.returncode == 9, died.stderr
    assert queue_files(dev) == {"scheduler": "none", "nomerges": "2", "write_cache": "write back"}
    service = runner_service(data_dir)
    wait_until(lambda: not (data_dir / quiet.RECORD).exists(), "the service to put back the killed run's changes")
    assert queue_files(dev) == found
    service.terminate()
    _, log = service.communicate(timeout=60)
    pid = died.stdout.strip()
    assert f"run 9 (pid {pid}) ended without putting back what it changed: put back from its record" in log
    queue = f"/sys/block/{os.path.basename(dev)}/queue"
    assert f"scheduler: {queue}/scheduler is 'mq-deadline' again" in log
    assert f"kernel_write_cache: {queue}/write_cache is 'write through' again" in log

"""The room a run's results take (run/space): the model against what a real smoke run left on the disk, and
a run that would not fit refused before it starts, at the console and from the web, naming the room it needs
and the room there is."""

import json
import os
import re

from conftest import login, make_app, needs_root, ssdbench

from ssdbench.human import size
from ssdbench.results import store
from ssdbench.run import plan, space
from ssdbench.suites import locked

pytestmark = needs_root()


def on_disk(path):
    """The bytes a file or a folder with everything in it takes on its file system: whole blocks, as df
    counts them."""
    total = os.lstat(path).st_blocks * 512
    for folder, dirs, files in os.walk(path):
        total += sum(os.lstat(os.path.join(folder, name)).st_blocks * 512 for name in dirs + files)
    return total


def test_the_model_covers_every_step_of_a_smoke_run_and_the_whole_within_four_times(smoke_run):
    """Each step's folder holds less than the model gives it, margin included, and the whole run (its folder and
    the database, which holds nothing else) less than the estimate, but more than a quarter of it: every kind
    of step is in smoke."""
    run, data_dir = smoke_run
    steps = plan.compile_plan(locked.load("smoke"), run["drive"]["capacity_bytes"])
    assert {s.kind for s in steps} == set(plan.BUILDERS)
    for step, stored in zip(steps, run["steps"], strict=True):
        folder = os.path.join(data_dir, stored["out_dir"])
        used = on_disk(folder) if os.path.exists(folder) else 0
        assert used <= space.MARGIN * space.step_bytes(step), (step.id, used, space.step_bytes(step))
    used = on_disk(os.path.join(data_dir, store.run_folder(run["id"]))) + on_disk(store.db_path(data_dir))
    estimate = space.results_bytes(steps)
    assert used < estimate < 4 * used, (used, estimate)


def needs(suite_name, capacity):
    return space.needed_bytes(plan.compile_plan(locked.load(suite_name), capacity))


def test_a_run_that_does_not_fit_is_refused_at_the_console_and_touches_nothing(loopdev, small_partition):
    dev, img = loopdev()
    data_dir = small_partition("16M")
    need = needs("smoke", 512 * 1024 * 1024)
    assert need > store.free_bytes(data_dir)
    proc = ssdbench("run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev), data_dir=data_dir)
    assert proc.returncode != 0
    error = proc.stderr.strip().splitlines()[-1]
    assert f"smoke on this drive needs {size(need)} and the data partition ({data_dir}) has " in error, error
    free = float(error.split(" has ")[1].split(" MB free")[0]) * 1e6
    assert free <= store.free_bytes(data_dir) + 1e5, error  # as it was then: the database has been made since
    assert json.loads(ssdbench("runs", "--json", data_dir=data_dir, check=True).stdout) == []
    assert os.stat(img).st_blocks == 0  # not a byte written to the drive


def test_the_web_refuses_a_run_that_does_not_fit_with_409(loopdev, small_partition):
    dev, _ = loopdev()
    data_dir = small_partition("16M")
    client = make_app(data_dir, SSDBENCH_EXTRA_DRIVES=[dev]).test_client()
    headers = {"X-CSRF-Token": login(client)}
    body = {"drive": dev, "suite": "smoke", "confirm": os.path.basename(dev)}
    response = client.post("/api/runs", json=body, headers=headers)
    assert response.status_code == 409
    error = response.get_json()["error"]
    need = needs("smoke", 512 * 1024 * 1024)
    # The free space it names is what there was at the refusal; the file system settles its own writes after it
    # (the login's session, SQLite's journal), so the space free now is near it, not always equal.
    stated = re.search(
        rf"needs {re.escape(size(need))} and the data partition \({re.escape(str(data_dir))}\) "
        r"has ([0-9.]+) MB free",
        error,
    )
    assert stated and abs(float(stated.group(1)) * 1e6 - store.free_bytes(data_dir)) < 1e6, error
    assert client.get("/api/runs").get_json()["runs"] == []
    # The Start form says the same, on the drives page.
    page = client.post("/start", data={**body, "csrf_token": headers["X-CSRF-Token"]})
    assert page.status_code == 409 and b"Not enough room for the results" in page.data

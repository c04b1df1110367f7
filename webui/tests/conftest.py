"""Shared fixtures: real loop devices, real fio, a real SQLite file in a temporary data directory."""

import json
import os
import subprocess
import sys
import time

import pytest

DATA = os.path.join(os.path.dirname(__file__), "data")


def data(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def needs_root():
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root for loop devices")


@pytest.fixture
def loopdev(tmp_path):
    """A fresh 512 MiB sparse file attached to a loop device."""
    made = []

    def make(size="512M", name="disk.img"):
        img = tmp_path / name
        subprocess.run(["truncate", "-s", size, str(img)], check=True)
        dev = subprocess.run(
            ["losetup", "-f", "--show", str(img)], check=True, capture_output=True, text=True
        ).stdout.strip()
        made.append(dev)
        return dev, img

    yield make
    for dev in made:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def wait_until(predicate, what, timeout=300):
    """Wait for a state, polling. The timeout only bounds a hang: it is far above the time the state
    takes even on a slow, busy machine, so reaching it means the state never came."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.1)


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

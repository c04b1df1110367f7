"""make bench, appliance pages: how long the pages a tester waits on take to answer, as the browser waits for them.

Over HTTP, logged in through the login form (session.py): the Drives page as listed and looked at again (every
drive discovered afresh: nvme-cli and smartctl on each), a Start refused at its confirmation (its drive discovered
afresh, the page drawn again with the refusal: all a Start does but queue the run), Traces and History, each
REQUESTS times. It prints each page's p50 and p95 and fails when a p95 is over LIMIT_MS (issue 45: Drives, Start
and Traces within a second, with four drives listed).

On this host: the real `ssdbench web` on a data folder of its own, with DRIVES loop devices listed (--drive),
which have no controller to ask, so this is the pages' own cost. Needs root. With --url, --pin and --drive: the
appliance at that address, as make bench-vm measures the VM's, whose emulated NVMe, SATA, SAS and USB drives are
asked as a PC's are. --short (make test, make test-vm): REQUESTS_SHORT requests a page, which checks that every
part works, not the times.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile

from bench_web import synthetic_run
from session import Session, served, timed

from ssdbench.results import store

DRIVES, REQUESTS, REQUESTS_SHORT, LIMIT_MS = 4, 40, 3, 1000
PIN = "246810"


def measure(url, pin, drive, requests):
    """{page: {p50_ms, p95_ms}}, and what a page did not show that it must."""
    browser = Session(url, pin=pin)
    problems = []
    if drive not in browser.get("/"):
        problems.append(f"the Drives page does not list {drive}")

    def start():
        status, text = browser.send("/start", {"drive": drive, "suite": "smoke", "confirm": "not-its-id"})
        if status != 409 or "Not started: the ID typed does not match" not in text:
            problems.append(f"a Start with a wrong ID answered {status}, not its refusal")

    pages = {
        "Drives": lambda: browser.get("/"),
        "Drives, looked at again": lambda: browser.get("/?refresh=1"),
        "Start, refused at its ID": start,
        "Traces": lambda: browser.get("/traces"),
        "History": lambda: browser.get("/history"),
    }
    results = {}
    for name, call in pages.items():
        results[name] = took = timed(requests, call)
        print(f"{name}: p50 {took['p50_ms']:.0f} ms, p95 {took['p95_ms']:.0f} ms", flush=True)
    return results, sorted(set(problems))


@contextlib.contextmanager
def local_appliance(work):
    """The real `ssdbench web` on this host with DRIVES loop devices and one done run: (its URL, a drive)."""
    devices = []
    data_dir = os.path.join(work, "data")
    run_id, _ = synthetic_run(data_dir)
    with contextlib.closing(store.connect(data_dir)) as db:
        store.finish_run(db, run_id, "done")  # History lists it; a run still going would refuse every Start
    try:
        for n in range(DRIVES):
            image = os.path.join(work, f"drive{n}.img")
            subprocess.run(["truncate", "-s", "64M", image], check=True)
            devices.append(
                subprocess.run(
                    ["losetup", "-f", "--show", image], check=True, capture_output=True, text=True
                ).stdout.strip()
            )
        drives = [arg for dev in devices for arg in ("--drive", dev)]
        with served(["web", "--data-dir", data_dir, *drives], env={**os.environ, "SSDBENCH_PIN": PIN}) as url:
            yield url, devices[0]
    finally:
        for dev in devices:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--short", action="store_true", help=f"{REQUESTS_SHORT} requests a page: check that it works")
    args.add_argument("--url", help="an appliance's web UI, e.g. http://127.0.0.1:8080 (default: one on this host)")
    args.add_argument("--pin", help="its login PIN (with --url)")
    args.add_argument("--drive", help="a drive it lists, to Start on (with --url)")
    a = args.parse_args()
    if a.url and not (a.pin and a.drive):
        args.error("--url needs --pin and --drive")
    requests = REQUESTS_SHORT if a.short else REQUESTS
    with contextlib.ExitStack() as stack:
        if a.url:
            url, pin, drive = a.url, a.pin, a.drive
        else:
            work = stack.enter_context(tempfile.TemporaryDirectory(prefix="ssdbench-bench-pages-"))
            (url, drive), pin = stack.enter_context(local_appliance(work)), PIN
        results, problems = measure(url, pin, drive, requests)
    if not a.short:
        problems += [
            f"{name}: p95 {r['p95_ms']:.0f} ms, over {LIMIT_MS} ms"
            for name, r in results.items()
            if r["p95_ms"] > LIMIT_MS
        ]
    for p in problems:
        print(f"PROBLEM: {p}")
    print(json.dumps({"pages": results, "ok": not problems}))
    sys.exit(0 if not problems else 1)


if __name__ == "__main__":
    main()

"""How long fio waited for a CPU while a step ran: the time its processes were ready to run and did not, because
other work held the CPU or the host's limits held fio back (docs/methodology.md, "The host's share of a figure").

The kernel counts it for every task (/proc/PID/task/TID/schedstat: time on a CPU, time waiting on a run queue,
in ns; a task of a CPU cgroup over its quota waits there too). fio's processes are read at each of the step's
ticks, fio and every process below it, and each keeps its last reading: a job that ends between two ticks loses
at most its last half second, and one that lasts less than a tick may not be read at all. Without schedstat (a
kernel built without it) nothing is counted, and the record says so.
"""

import os
import time

from . import derive


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])  # after the command, which may hold spaces


def family(root):
    """`root` and every process below it."""
    children = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                children.setdefault(_ppid(entry.name), []).append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # gone since the listing
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class CpuWait:
    def __init__(self):
        self.started = time.monotonic()
        self.tasks = {}  # (pid, tid) -> (ns on a CPU, ns waiting for one), its last reading

    def sample(self, root):
        for pid in family(root):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        ran, waited = (int(v) for v in f.read().split()[:2])
                except (OSError, ValueError):
                    continue  # the task ended since the listing
                self.tasks[pid, int(tid)] = (ran, waited)

    def record(self):
        """The step's count: seconds fio's processes ran and waited, and the wait as a percent of the step's wall
        time since this began (the step's fio), or why it is unknown."""
        wall = time.monotonic() - self.started
        if not self.tasks:
            schedstat = os.path.exists("/proc/self/schedstat")
            why = "no reading of fio's processes" + ("" if schedstat else ": the kernel has no schedstat")
            return {"unavailable": why}
        ran = sum(r for r, _ in self.tasks.values()) / 1e9
        waited = sum(w for _, w in self.tasks.values()) / 1e9
        return {
            "tasks": len(self.tasks),
            "ran_s": round(ran, 3),
            "waited_s": round(waited, 3),
            "wall_s": round(wall, 3),
            "wait_percent": round(100 * waited / wall, 2) if wall > 0 else None,
        }


def metrics(record):
    """The step's metric of its record: the wait, in percent of its fio's wall time."""
    if record.get("wait_percent") is None:
        return []
    source = (
        f"detail cpu_wait: {record['waited_s']} s that fio's {record['tasks']} tasks waited for a CPU (the second "
        f"field of their /proc/PID/task/TID/schedstat) / the {record['wall_s']} s that fio ran, x 100"
    )
    return [derive.Metric("host.cpu_wait_percent", record["wait_percent"], "%", source)]

"""The time a run has left, learned from its own steps as they end (the live view's ETA).

The plan foresees each step's time from the suite's reference rates, fio's start of each job and the runner's
work around each step. A drive or a host unlike the reference takes another time, and not alike in every step:
a step bound to the drive's size (a fill, a sweep, a trace's IOs played as fast as the drive takes them)
follows the drive's speed, a purge or a whole-drive trim the drive's own command, and a step of a fixed runtime
only the work around it (on the VM's SATA drive, each took 1.3 to 2.4 s more than foreseen). So each step has a
pace (PACES), and each step still to come is foreseen at its estimate times how long the ended steps of its
pace took against their own estimates; a pace no step has ended in yet keeps the plan's estimate. The percent
shown stays the plan's share of the work done (runner.progress), so that it never goes back; the ETA is this.
"""

import time

SIZED = ("sweep", "trace")  # kinds whose time is their IOs' at the drive's speed
COMMAND = ("purge", "trim")  # the drive's own command
PACES = ("timed", "sized", "command")


def pace(step):
    """A step's pace: "command", "sized" (a step, or one of its jobs, bound to the drive's size), or "timed"."""
    if step.kind in COMMAND:
        return "command"
    if step.kind in SIZED:
        return "sized"
    # a burst's jobs replay timed iologs, as long as its estimate sets (burst.period_count)
    unbounded = step.kind != "burst" and any("runtime" not in options for _, options in step.jobs)
    return "sized" if unbounded else "timed"


class Pace:
    """The steps' times as they end, and the time left foreseen from them."""

    def __init__(self, steps):
        self.steps = steps
        self.paces = [pace(s) for s in steps]  # the progress asks twice a second: each step's, found once
        self.took = {}  # step index -> its wall seconds, its idle before it included, as the estimate counts it
        self.began = None  # (step index, monotonic time) of the step running

    def start(self, index):
        self.began = (index, time.monotonic())

    def end(self, index):
        if self.began and self.began[0] == index:
            self.took[index] = time.monotonic() - self.began[1]
        self.began = None

    def ratio(self, kind):
        """How long the ended steps of a pace took over their estimates; 1 where none has ended."""
        ended = [s for s, p in zip(self.steps, self.paces) if s.index in self.took and p == kind and s.estimate_s > 0]
        foreseen = sum(s.estimate_s for s in ended)
        return sum(self.took[s.index] for s in ended) / foreseen if foreseen else 1.0

    def left(self, index, fraction):
        """Seconds left from step `index`, `fraction` of it done (fio's own count, or its time), to the run's end:
        its rest, and each step after it, at their paces' ratios."""
        ratios = {kind: self.ratio(kind) for kind in PACES}
        foreseen = [s.estimate_s * ratios[p] for s, p in zip(self.steps[index:], self.paces[index:])]
        return foreseen[0] * (1 - fraction) + sum(foreseen[1:]) if foreseen else 0.0

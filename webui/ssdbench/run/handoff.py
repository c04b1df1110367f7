"""Jobs that run one after another with no gap between them: fio's `stonewall` starts the next job only after
polling, twice 100 ms, and setting it up then. Instead the jobs start together, set up at once, and each waits,
before its first IO, for a line from a FIFO of its own (`<job>.go`), which the job before it writes as its IOs
end. The wait and the line are fio's own `start_fifo` and `done_fifo` (our patch, FIO_PATCH): a thread woken
through a pipe, well under a millisecond. A stock fio lacks them; there, what hands over says why (the trace's
playback uses fio's `exec_prerun` and `exec_postrun`, a shell each; the host-cost calibration, `stonewall`).

The runner makes every FIFO before the fio whose job waits on it starts, and holds it open, read and write,
until its handoff is done (Fifos): the line a job writes stays in it until the next job reads it, and when the
runner ends, whatever ends it, a job still waiting reads an end of file and ends with no IO.
"""

import contextlib
import os

from ..system import tools

FIO_PATCH = "0002-backend-add-start_fifo-and-done_fifo.patch"
GO = "go"  # the line a job writes to the next one's FIFO as it ends
STOP = "stop"  # the line the runner writes to every FIFO it holds to end the jobs still waiting


def native():
    """Whether the fio on PATH hands over through FIFOs itself (FIO_PATCH's start_fifo), or needs a stock fio's
    ways. fio is asked each time (a few ms here): a caller that needs it for many things asks once."""
    return tools.fio_knows("start_fifo")


def fifo(name):
    """The FIFO that job `name` waits on before its first IO, in fio's working folder."""
    return f"{name}.go"


def options(wait, post, native=True):
    """The options with which a job waits to read GO from the FIFO `wait` and, as it ends, writes GO to the FIFO
    `post` (either None: no such handoff): fio's own start_fifo and done_fifo where `native`, else a stock fio's
    shell commands."""
    if native:
        before, after = {"start_fifo": wait}, {"done_fifo": post}
    else:
        before = {"exec_prerun": f'read -r line < {wait} && test "$line" = {GO}'}
        # fio cuts an option at a ";" or "#", and appends its own redirection of stdout to the command: the line
        # goes to the FIFO from inside a subshell, opened read and write so that the open never waits
        after = {"exec_postrun": f"(echo {GO} >&3) 3<>{post}"}
    return {**(before if wait else {}), **(after if post else {})}


def record(native, instead, why):
    """What is recorded of the handoffs: fio's own, or the options a stock fio hands over with `instead`, and
    `why`."""
    if native:
        return {"options": "start_fifo, done_fifo", "fio_patch": FIO_PATCH}
    return {"options": instead, "why": why}


class Fifos:
    """The FIFOs of the jobs that wait on one, in `folder`, made and held open by the runner (module docstring)."""

    def __init__(self, folder):
        self.folder, self.held, self.made = folder, {}, []

    def make(self, name):
        path = os.path.join(self.folder, name)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # one left by a run cut short
        os.mkfifo(path, 0o600)
        self.made.append(path)
        self.held[name] = os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def stop(self):
        """Every job still waiting ends, now or as it comes to wait: the line stays in its FIFO until read."""
        for fd in self.held.values():
            os.write(fd, f"{STOP}\n".encode())

    def release(self, names):
        for name in [name for name in names if name in self.held]:
            os.close(self.held.pop(name))

    def remove(self):
        self.release(list(self.held))
        for path in self.made:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        self.made = []

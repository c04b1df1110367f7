"""One boot of a VM in QEMU, driven from the host: its serial console read from a socket and saved to a
log, a root shell typed on it, an HTTP client with a session for the web UI, which QEMU forwards to a
free host port, and QEMU's machine protocol (QMP) to plug devices in while it runs. Shared by test_vm.py and
test_boot.py."""

import http.cookiejar
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

BOOT_TIMEOUT_S = 300
RUN_TIMEOUT_S = 900


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VM:
    """One boot: QEMU with its serial console on a socket, and an HTTP client with a session."""

    def __init__(self, command, folder, console_log, env=None, uart=True):
        """command: a QEMU launcher and its arguments, which forwards the guest's port 80 to the host port
        that SSDBENCH_HOST_PORT names (board/vm/qemu.sh, board/boottest/qemu.sh); the serial console is added
        on a socket in folder. uart=False: a PC without a serial port, which has no console to read or type on,
        only its web UI and QMP."""
        self.port = free_port()
        self.seen = {}  # run id -> its progress as wait_run saw it
        sock = os.path.join(folder, "serial.sock")
        self.qmp_path = os.path.join(folder, "qmp.sock")
        self.started = time.monotonic()
        # wait=on: QEMU waits for us to connect, so the console is read from its first byte.
        serial = ["-serial", "chardev:ser", "-chardev", f"socket,id=ser,path={sock},server=on,wait=on"]
        self.proc = subprocess.Popen(
            [*command, *(serial if uart else []), "-qmp", f"unix:{self.qmp_path},server=on,wait=off"],
            env={**os.environ, **(env or {}), "SSDBENCH_HOST_PORT": str(self.port)},
        )
        self.console = b""
        self.shell_ended = 0
        self.lock = threading.Lock()
        self.serial = self.reader = None
        self.log = open(console_log, "ab")
        self.http = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = None
        if uart:
            self._connect(sock)

    def _connect(self, sock):
        deadline = time.monotonic() + 30
        while True:
            try:
                self.serial = socket.socket(socket.AF_UNIX)
                self.serial.connect(sock)
                break
            except OSError as exc:
                self.serial.close()
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise AssertionError("QEMU did not open its serial console socket") from exc
                time.sleep(0.1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while data := self.serial.recv(65536):
            with self.lock:
                self.console += data
            self.log.write(data)
            self.log.flush()

    def console_text(self):
        with self.lock:
            return self.console.decode(errors="replace")

    def wait_console(self, text, timeout=120, after=0):
        """Where `text` first appears after `after`."""
        deadline = time.monotonic() + timeout
        while (found := self.console_text().find(text, after)) < 0:
            assert self.proc.poll() is None, f"QEMU exited while waiting for {text!r} on the console"
            assert time.monotonic() < deadline, f"{text!r} did not appear on the serial console"
            time.sleep(0.5)
        return found

    def qmp(self, command, **arguments):
        """One QMP command (device_add: a device plugged in while the VM runs), on a connection of its own."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(60)
            sock.connect(self.qmp_path)
            replies = sock.makefile("r")
            json.loads(replies.readline())  # QEMU's greeting
            for message in ({"execute": "qmp_capabilities"}, {"execute": command, "arguments": arguments}):
                sock.sendall(json.dumps(message).encode() + b"\n")
                while "event" in (reply := json.loads(replies.readline())):
                    pass
                assert "return" in reply, (message, reply)
            return reply["return"]

    def type(self, text):
        self.serial.sendall(text.encode())

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **({"X-CSRF-Token": self.csrf} if self.csrf else {})},
        )
        try:
            with self.http.open(request, timeout=120) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def page(self, path):
        """A page's HTML; where the web UI fails, the end of its log, which holds the traceback, says why."""
        try:
            with self.http.open(f"http://127.0.0.1:{self.port}{path}", timeout=120) as response:
                return response.read().decode()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{path}: {exc}\n{self.shell('tail -n 40 /var/log/ssdbench-web.log')}") from exc

    def file_status(self, run_id, name):
        """The HTTP status of one of a run's raw files, as the run page links it."""
        try:
            with self.http.open(f"http://127.0.0.1:{self.port}/runs/{run_id}/files/{name}", timeout=60) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def wait_for_ui(self):
        """Seconds from QEMU's start to the web UI's first answer."""
        deadline = self.started + BOOT_TIMEOUT_S
        while True:
            assert self.proc.poll() is None, "QEMU exited during boot"
            try:
                status, session = self.api("GET", "/api/session")
                if status == 200:
                    self.csrf = session["csrf_token"]
                    return time.monotonic() - self.started
            except (OSError, ValueError):
                pass
            assert time.monotonic() < deadline, "the web UI did not answer"
            time.sleep(1)

    def login(self, pin):
        status, body = self.api("POST", "/api/login", {"pin": pin})
        assert status == 200, body
        self.csrf = body["csrf_token"]

    def boot(self, pin):
        boot_s = self.wait_for_ui()
        print(f"\nboot time: {boot_s:.1f} s from QEMU's start to the web UI answering")
        self.login(pin)

    def start_run(self, drive):
        body = {"drive": drive["path"], "suite": "smoke", "confirm": drive["confirm_id"]}
        if drive["needs_wipe_confirmation"]:
            body["destroy_data"] = True
        status, body = self.api("POST", "/api/runs", body)
        assert status == 201, body
        return body["id"]

    def progress(self, run_id):
        status, body = self.api("GET", f"/api/runs/{run_id}/progress")
        assert status == 200, body
        return body

    def wait_run(self, run_id):
        """(its state, the seconds waited) once the run has ended; its live view's progress as this saw it, every
        2 s, in self.seen[run_id]: (seconds since the wait began, the progress answer)."""
        started = time.monotonic()
        self.seen[run_id] = []
        while (p := self.progress(run_id))["state"] in ("queued", "running"):
            self.seen[run_id].append((time.monotonic() - started, p))
            assert time.monotonic() - started < RUN_TIMEOUT_S, f"run {run_id} did not end"
            time.sleep(2)
        return p["state"], time.monotonic() - started

    def run(self, run_id):
        status, body = self.api("GET", f"/api/runs/{run_id}")
        assert status == 200, body
        return body

    def status_screen(self):
        """Wait for the status screen, which reads the Enter that leaves it. Between a shell's exit and the
        next status screen nothing reads the serial port, and what is typed then is lost."""
        self.wait_console("Press Enter for a shell.", after=self.shell_ended)

    def shell(self, command):
        """Run a command in a root shell on the serial console (Enter leaves the status screen; exit goes
        back to it) and return its output, between {{{ and }}}. The typed command holds those marks only split
        by quotes, so that its echo is never mistaken for the output. exit is typed only once the output has
        arrived: the shell leads its session, and its exit hangs the port up, which drops what the UART has not
        sent yet (on a busy host, the whole answer of a `...; exit` line)."""
        self.status_screen()
        mark = len(self.console_text())
        self.type("\r")
        typed = self.wait_console("# ", after=self.wait_console("A root shell.", after=mark))
        self.type(f'echo "{{{{""{{$({command} 2>&1)}}""}}}}"\r')
        start = self.wait_console("{{{", after=typed)
        end = self.wait_console("}}}", after=start + 3)
        self.type("exit\r")
        self.shell_ended = end
        return self.console_text()[start + 3 : end].strip()

    def poweroff(self):
        """Enter leaves the status screen for a shell; poweroff goes through init's shutdown."""
        self.status_screen()
        mark = len(self.console_text())
        self.type("\r")
        self.wait_console("# ", after=self.wait_console("A root shell.", after=mark))
        self.type("poweroff\r")
        assert self.proc.wait(timeout=240) == 0

    def kill(self):
        """The power cut."""
        self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            self.kill()
        if self.serial:
            self.serial.close()
            self.reader.join(timeout=5)
        self.log.close()

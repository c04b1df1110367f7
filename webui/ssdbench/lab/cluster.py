"""A PostgreSQL of its own in a folder, for a local lab, the tests and the load test: Debian's `postgresql`
programs (initdb, pg_ctl), listening only on a unix socket in that folder, run as `nobody` when we are root
(PostgreSQL refuses to run as root). A production lab uses a PostgreSQL of its own instead (docs/lab.md).

It trusts whoever reaches its socket (no password to keep), so nobody else may reach it: the folder and the
socket are its owner's alone (0700), and root, which runs the lab server, passes as root passes everywhere."""

import glob
import os
import shutil
import subprocess

from ..errors import SsdbenchError

SUPERUSER = "lab"


def bindir():
    """The folder of the newest PostgreSQL's programs."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    on_path = shutil.which("pg_ctl")
    if on_path:
        return os.path.dirname(on_path)
    raise SsdbenchError("no PostgreSQL programs (initdb, pg_ctl): apt-get install postgresql")


class Cluster:
    def __init__(self, folder):
        self.folder = os.path.abspath(folder)
        self.data = os.path.join(self.folder, "pg")
        self.bin = bindir()
        self.as_user = {"user": "nobody", "group": "nogroup"} if os.geteuid() == 0 else {}

    def _run(self, *argv):
        proc = subprocess.run(
            [os.path.join(self.bin, argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            cwd=self.folder,
            **self.as_user,
        )
        if proc.returncode != 0:
            raise SsdbenchError(f"{argv[0]} failed: {(proc.stderr or proc.stdout).strip()}")
        return proc

    def start(self):
        """Made on first use, started unless it runs."""
        os.makedirs(self.folder, exist_ok=True)
        os.chmod(self.folder, 0o700)
        if self.as_user:
            shutil.chown(self.folder, self.as_user["user"], self.as_user["group"])
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self._run("initdb", "-D", self.data, "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-instructions")
        running = subprocess.run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "status"], capture_output=True)
        if running.returncode != 0:
            options = f"-k {self.folder} -c unix_socket_permissions=0700 -c listen_addresses='' -c max_connections=200"
            log = os.path.join(self.folder, "postgresql.log")
            self._run("pg_ctl", "-D", self.data, "-l", log, "-o", options, "-w", "-t", "300", "start")

    def url(self, name):
        return f"postgresql:///{name}?host={self.folder}&user={SUPERUSER}"

    def create(self, name):
        """A database called `name` (letters, digits, underscores), unless there is one."""
        from . import schema

        conn = schema.connect(self.url("postgres"))
        try:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)

    def stop(self):
        subprocess.run(
            [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"],
            capture_output=True,
            **self.as_user,
        )

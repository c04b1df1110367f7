"""Missing tools are named, with the package that brings them; a tool never reads the caller's terminal; the
release name is git describe."""

import os
import pty
import subprocess
import sys

import pytest
from conftest import ssdbench

from ssdbench.errors import SsdbenchError
from ssdbench.system import tools


@pytest.mark.parametrize("name, package", [("fio", "fio"), ("nvme", "nvme-cli"), ("smartctl", "smartmontools")])
def test_missing_tool_names_its_package(monkeypatch, name, package):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(
        SsdbenchError, match=f"^{name} is not installed \\(not found in PATH\\); install the {package} package$"
    ):
        tools.require(name)
    assert tools.version(name) == "not installed"


def test_a_tool_never_sees_the_callers_terminal():
    """On the appliance the runner's stdin is the console (init starts it there): blkdiscard, seeing a terminal,
    refused to purge a drive that held a partition table. A caller on a real terminal (a pty) runs a tool that
    says whether its own stdin is one."""
    main, terminal = pty.openpty()
    try:
        tool = "['sh', '-c', 'test -t 0 && echo tty || echo none']"
        probe = f"from ssdbench.system import tools; print(tools.run({tool}))"
        proc = subprocess.run([sys.executable, "-c", probe], stdin=terminal, capture_output=True, text=True)
    finally:
        os.close(main)
        os.close(terminal)
    assert proc.returncode == 0 and proc.stdout.strip() == "none", proc.stdout + proc.stderr


def test_a_tool_gets_none_of_the_callers_secrets(monkeypatch):
    monkeypatch.setenv("SSDBENCH_TOKEN", "ssdb_secret")
    monkeypatch.setenv("SSDBENCH_PIN", "424242")
    monkeypatch.setenv("SSDBENCH_PORT", "80")
    seen = tools.run(["env"])
    assert "ssdb_secret" not in seen and "424242" not in seen and "SSDBENCH_PORT=80" in seen


def test_failing_tool_reports_its_last_line():
    with pytest.raises(SsdbenchError, match="exit 2.*nope"):
        tools.run(["ls", "/nope"], ok=(0,))


def test_the_release_name_is_git_describe_and_a_valid_package_version():
    from packaging.version import Version

    from ssdbench import __version__, pep440

    described = subprocess.run(
        ["git", "describe", "--tags", "--always", "--dirty"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(__file__),
    ).stdout.strip()
    # A "-dirty" that the import did not see means an earlier test changed a tracked file: the status names it.
    changed = subprocess.run(
        ["git", "status", "--short", "--untracked-files=no"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(__file__),
    )
    assert __version__ == described, changed.stdout
    assert pep440("v1.2-3-gabc1234-dirty") == "1.2.post3+gabc1234.dirty"
    assert pep440("abc1234") == "0+gabc1234" and pep440("v0.2.0") == "0.2.0"
    for name in ("v1.2-3-gabc1234-dirty", "abc1234-dirty", "unknown", "1.0-rc1", described):
        Version(pep440(name))  # raises if setuptools would refuse it
    out = ssdbench("--version", env=dict(os.environ, SSDBENCH_VERSION="v9.9-1-gdeadbee")).stdout
    assert out.strip() == "ssdbench v9.9-1-gdeadbee"

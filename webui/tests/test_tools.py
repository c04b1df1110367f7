"""Missing tools are named, with the package that brings them."""

import pytest

from ssdbench import tools
from ssdbench.errors import SsdbenchError


@pytest.mark.parametrize("name, package", [("fio", "fio"), ("nvme", "nvme-cli"), ("smartctl", "smartmontools")])
def test_missing_tool_names_its_package(monkeypatch, name, package):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SsdbenchError, match=f"^{name} is not installed \\(not found in PATH\\); install the {package} package$"):
        tools.require(name)
    assert tools.version(name) == "not installed"


def test_failing_tool_reports_its_last_line():
    with pytest.raises(SsdbenchError, match="exit 2.*nope"):
        tools.run(["ls", "/nope"], ok=(0,))

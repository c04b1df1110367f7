"""The package as a user installs it: a wheel built from the sources alone (no `make assets` before it)
carries uPlot and the suites, and, installed into a fresh virtual environment, runs `smoke` on a loop device
and writes a bundle that verifies. The uPlot pin of the wheel build and the image's Buildroot package agree."""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import attach, needs_root

import fetch_uplot
from ssdbench import __version__, pep440

WEBUI = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = os.path.dirname(WEBUI)
# What a source tree holds but a fresh checkout does not, or what the package does not ship.
NOT_SOURCES = shutil.ignore_patterns("vendor", "build", "*.egg-info", "__pycache__", ".pytest_cache", "tests", "bench")


def test_the_wheel_build_and_the_image_pin_the_same_upLot():
    with open(os.path.join(TOP, "package", "uplot", "uplot.mk")) as f:
        assert re.search(r"^UPLOT_VERSION = (\S+)$", f.read(), re.M)[1] == fetch_uplot.VERSION
    with open(os.path.join(TOP, "package", "uplot", "uplot.hash")) as f:
        pinned = re.search(r"^sha256\s+([0-9a-f]{64})\s+uplot-(\S+)\.tgz$", f.read(), re.M)
    assert pinned.groups() == (fetch_uplot.SHA256, fetch_uplot.VERSION)


@needs_root()
def test_a_wheel_from_the_sources_alone_runs_smoke_in_a_fresh_venv(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(WEBUI, src, ignore=NOT_SOURCES)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        env=dict(env, SSDBENCH_VERSION=__version__),
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    [wheel] = (tmp_path / "dist").iterdir()
    assert wheel.name.startswith(f"ssdbench-{pep440(__version__)}-py3-none-any")
    names = set(zipfile.ZipFile(wheel).namelist())
    vendor = {f"ssdbench/static/vendor/{name}" for name in fetch_uplot.FILES.values()}
    suites = {f"ssdbench/suites/{name}.toml" for name in ("smoke", "quick", "standard", "full")}
    assert vendor | suites | {"ssdbench/suites/MANIFEST.json", "ssdbench/web/templates/run.html"} <= names
    assert not any(name.startswith(("tests/", "bench/")) or "/tests/" in name for name in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--no-index", str(wheel)], check=True, env=env)
    dev = attach(tmp_path / "drive.img", "3G")
    try:

        def cli(*args):
            # From the temporary folder, so that nothing of the checkout can be imported instead.
            proc = subprocess.run(
                [venv / "bin" / "ssdbench", *args], cwd=tmp_path, env=env, capture_output=True, text=True
            )
            assert proc.returncode == 0, (args, proc.stderr)
            return proc.stdout

        data = str(tmp_path / "data")
        cli("run", "--suite", "smoke", "--drive", dev, "--confirm", os.path.basename(dev), "--data-dir", data)
        bundle = cli("bundle", "1", "-o", str(tmp_path), "--data-dir", data).strip()
        assert "OK" in cli("verify", bundle)
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.mark.parametrize("module, wanted", [("jsonschema", "_validator"), ("orjson", "_loads")])
def test_the_appliance_runs_without_the_labs_own_modules(module, wanted):
    """jsonschema and orjson are the lab's (the `lab` extra), which the image does not hold: the web app imports
    without them, and only the lab's admission of an upload asks for each, by name."""
    blocked = f"import sys; sys.modules['{module}'] = None; import ssdbench.web; from ssdbench.lab import admit; "
    proc = subprocess.run([sys.executable, "-c", blocked + f"admit.{wanted}()"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"SsdbenchError: the lab needs {module}" in proc.stderr and "'ssdbench[lab]'" in proc.stderr, proc.stderr

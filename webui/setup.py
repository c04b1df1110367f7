"""The package build: pyproject.toml says everything, except that a wheel must carry uPlot, which is not in
the source tree; build_py fetches it (fetch_uplot.py). An editable install serves the checkout's own
static/vendor/, which `make assets` fills. The image's build sets SSDBENCH_UPLOT=external: Buildroot's
package/uplot installs the same files, and a Buildroot package must not download while it builds."""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fetch_uplot  # noqa: E402


class BuildPy(build_py):
    def run(self):
        super().run()
        if not self.editable_mode and os.environ.get("SSDBENCH_UPLOT") != "external":
            fetch_uplot.fetch(os.path.join(self.build_lib, "ssdbench", "static", "vendor"))


setup(cmdclass={"build_py": BuildPy})

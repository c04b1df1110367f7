"""Fetch uPlot, the charts' library, into a folder: the npm registry's tarball at a pinned version, checked
against its sha256 before anything is taken from it. `make assets` calls it for a checkout, and the package
build (setup.py) for a wheel, so `pip install ./webui` needs neither npm nor a prior `make assets`.

The image gets the same tarball through Buildroot's package/uplot, whose uplot.mk and uplot.hash pin the same
version and hash (tests/test_packaging.py checks that they agree).

    python3 fetch_uplot.py DEST
"""

import hashlib
import io
import os
import sys
import tarfile
import urllib.request

VERSION = "1.6.31"
SHA256 = "015d4be9095072922bc31d8c63f93bc1b7cd5b27d14d17a1708ff76775f9eb90"
URL = f"https://registry.npmjs.org/uplot/-/uplot-{VERSION}.tgz"
# What the pages load, and uPlot's MIT licence, which must travel with its code.
FILES = {
    "package/dist/uPlot.iife.min.js": "uPlot.iife.min.js",
    "package/dist/uPlot.min.css": "uPlot.min.css",
    "package/LICENSE": "uPlot.LICENSE",
}


def fetch(dest, url=URL, sha256=SHA256, files=None):
    """Write FILES into dest, unless a fetch has already put them all there. Another npm package's tarball (the
    browser tests' axe-core) comes the same way: its url, sha256 and {member: name} given."""
    files = files or FILES
    if all(os.path.exists(os.path.join(dest, name)) for name in files.values()):
        return
    with urllib.request.urlopen(url, timeout=60) as response:
        tarball = response.read()
    digest = hashlib.sha256(tarball).hexdigest()
    if digest != sha256:
        raise SystemExit(f"{url}: sha256 {digest}, expected {sha256}; refusing it")
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
        for member, name in files.items():
            data = tar.extractfile(member).read()
            with open(os.path.join(dest, name + ".part"), "wb") as f:
                f.write(data)
            os.replace(os.path.join(dest, name + ".part"), os.path.join(dest, name))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.rsplit("\n\n", 1)[1].strip())
    fetch(sys.argv[1])

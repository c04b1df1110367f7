"""The locked suites: load the files, check them against the shipped hash manifest, validate.

A suite's hash is the sha256 of its canonical form (the parsed TOML as sorted,
compact JSON), so comments and layout may change but no value can.
"""

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

from .errors import SsdbenchError

FORMAT = 1
STEP_KINDS = ("purge", "fio")
RW_MODES = ("read", "write", "randread", "randwrite", "rw", "randrw", "trim", "randtrim")
DATA_KINDS = ("incompressible", "compressible", "n/a")
STEP_KEYS = {"id", "kind", "title", "rw", "bs", "iodepth", "numjobs", "span", "runtime", "data", "rwmixread"}
SUITE_KEYS = {"format", "name", "version", "title", "comparable", "fio", "estimate", "steps", "description"}

_UNITS = {"": 1, "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2, "g": 1024**3, "gib": 1024**3,
          "t": 1024**4, "tib": 1024**4}


@dataclass(frozen=True)
class Suite:
    name: str
    data: dict
    sha256: str
    locked: bool  # True when the hash matches the shipped manifest

    @property
    def steps(self):
        return self.data["steps"]


def canonical(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def suite_hash(data):
    return hashlib.sha256(canonical(data)).hexdigest()


def parse_size(text):
    """Bytes from '4k', '128KiB', '8GiB' or a plain integer; binary units, as fio's default kb_base."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise SsdbenchError(f"not a size: {text!r} (use bytes, or k/KiB, m/MiB, g/GiB, t/TiB)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _suite_dir():
    return resources.files("ssdbench") / "suites"


def manifest():
    return json.loads((_suite_dir() / "MANIFEST.json").read_text())


def names():
    return sorted(manifest())


def _parse(text, origin):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SsdbenchError(f"suite {origin} is not valid TOML: {exc}") from exc
    validate(data, origin)
    return data


def load(name=None, path=None, allow_non_standard=False):
    """A suite by its shipped name, or from a file; refused if its hash is not the locked one."""
    if path is not None:
        try:
            text = open(path, encoding="utf-8").read()
        except OSError as exc:
            raise SsdbenchError(f"cannot read suite file {path}: {exc.strerror}") from exc
        origin = str(path)
    else:
        if name not in manifest():
            raise SsdbenchError(f"no suite named {name!r}; the suites are: {', '.join(names())}")
        text = (_suite_dir() / f"{name}.toml").read_text(encoding="utf-8")
        origin = f"{name}.toml"
    data = _parse(text, origin)
    digest = suite_hash(data)
    expected = manifest().get(data["name"])
    locked = digest == expected
    if not locked and not allow_non_standard:
        if expected is None:
            why = f"{data['name']!r} is not one of the locked suites ({', '.join(names())})"
        else:
            why = (f"its hash {digest[:16]}... differs from the locked hash {expected[:16]}... "
                   f"of suite {data['name']!r}: the file was changed")
        raise SsdbenchError(f"suite {origin} refused: {why}. Results from it would not be comparable; "
                            "pass --non-standard to run it anyway, marked non-standard.")
    return Suite(data["name"], data, digest, locked)


def validate(data, origin="suite"):
    def fail(msg):
        raise SsdbenchError(f"{origin}: {msg}")

    if data.get("format") != FORMAT:
        fail(f"format must be {FORMAT}, found {data.get('format')!r}")
    for key in ("name", "version", "title", "steps"):
        if key not in data:
            fail(f"missing key {key!r}")
    unknown = set(data) - SUITE_KEYS
    if unknown:
        fail(f"unknown keys {sorted(unknown)}")
    ids = [s.get("id") for s in data["steps"]]
    if len(set(ids)) != len(ids):
        fail("step ids must be unique")
    for step in data["steps"]:
        sid = step.get("id") or "?"
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", str(step.get("id", ""))):
            fail(f"step {sid}: id must be lower-case letters, digits and dashes")
        if step.get("kind") not in STEP_KINDS:
            fail(f"step {sid}: kind must be one of {STEP_KINDS}")
        unknown = set(step) - STEP_KEYS
        if unknown:
            fail(f"step {sid}: unknown keys {sorted(unknown)}")
        if step["kind"] != "fio":
            continue
        if step.get("rw") not in RW_MODES:
            fail(f"step {sid}: rw must be one of {RW_MODES}")
        if step.get("data") not in DATA_KINDS:
            fail(f"step {sid}: data must be one of {DATA_KINDS}")
        writes = step["rw"] not in ("read", "randread")
        if writes == (step["data"] == "n/a"):
            fail(f"step {sid}: data must be 'n/a' exactly when the step only reads")
        parse_size(step.get("bs", ""))
        for key in ("iodepth", "numjobs"):
            if not isinstance(step.get(key), int) or step[key] < 1:
                fail(f"step {sid}: {key} must be a whole number >= 1")
        span = step.get("span")
        if not isinstance(span, dict) or set(span) != {"offset", "size"}:
            fail(f"step {sid}: span must be {{offset = ..., size = ...}}")
        for value in span.values():
            if not str(value).endswith("%"):
                parse_size(value)
        if "runtime" in step and (not isinstance(step["runtime"], int) or step["runtime"] < 1):
            fail(f"step {sid}: runtime must be whole seconds >= 1")

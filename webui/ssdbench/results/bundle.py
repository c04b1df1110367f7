"""Result bundles: one self-contained .zip per run that anyone can check, read and re-run without ssdbench.

Layout (also written into the bundle's README.txt):
  manifest.json          format, ssdbench version, suite and hash, the sha256 of every other file
  result.json            the run document: every metric with its unit and source, every series
  report.html            the report, offline: report.js, uPlot and result.json inlined
  environment.json       the testbed and the quiet-OS controls
  drive/                 identity.json, health-before.json, health-after.json
  metrics/NN-step.csv    each step's metric table
  series/NN-step/*.csv   each time series (series/run/ for the run's own, e.g. temperature)
  jobs/NN-step.fio       the exact fio job files, and rerun.sh to run them with plain fio
  raw/NN-step/           fio's own JSON, logs and replay files, as written during the run (a trace's
                         replay files and per-IO logs gzip-compressed)

A repeat set's bundle holds every run of the set, each as a run bundle holds it but its manifest, under
run-N/ (N its place in the set), beside the set's own files; one manifest covers them all:
  repeat.json            the set and its summary: each headline figure's values, mean, stdev, CoV, min, max
  summary.csv            the summary as a table, one headline figure a row

A bundle is checked by hashes only: they catch damage and edits, not someone who rewrites the manifest too.
"""

import csv
import datetime
import hashlib
import io
import json
import math
import os
import re
import shlex
import shutil
import socket
import zipfile
import zlib
from contextlib import ExitStack

from .. import __version__
from ..errors import SsdbenchError
from ..suites import locked
from ..system import durable
from . import document, offline_report, repeatability, run_schema, store, zip_safety

FORMAT = "ssdbench-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
RESULT = "result.json"
REPEAT = "repeat.json"
# What reading a damaged member can raise: a bad CRC, a broken deflate stream, a cut-off file.
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError)
# summary.csv: a headline figure a row (results/repeatability.py names each column).
SUMMARY_COLUMNS = ("key", "unit", "kind", "n", "mean", "stdev", "cov_percent", "min", "max")
SUMMARY_COLUMNS += ("threshold_percent", "flagged")
# The run folder's own files, and their names in a bundle; everything else in the folder goes under raw/.
RUN_FILES = {
    "environment.json": "environment.json",
    "health-before.json": "drive/health-before.json",
    "health-after.json": "drive/health-after.json",
}
BLOCK = 1 << 20
# rerun.sh's edit of a trace's job file: its handoffs, fio's own or a stock fio's shell commands, give way to
# stonewall (sed expressions that any sed takes)
RERUN_SED = (
    "s/^start_fifo=.*/stonewall=1/",
    "/^done_fifo=/d",
    "s/^exec_prerun=.*/stonewall=1/",
    "/^exec_postrun=/d",
)
# manifest.json and result.json are read into memory: a full suite's are a few MB.
MAX_JSON_BYTES = 256 << 20
# What a problem quotes of an imported document's value: a lab's refusal of an 8 MB suite name is a line.
QUOTED = 40


class BundleError(SsdbenchError):
    """A bundle that fails its checks: every problem found, one per line."""


def fat_safe(text, limit=40):
    """A name part that FAT, exFAT and Windows all accept, and that reads the same in a shell."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text or "").strip("-.")[:limit].strip("-.") or "unknown"


def bundle_name(run):
    """<model>_<serial>_<suite>_<UTC start>.zip for a run; the suite as <suite>-repeatN for a repeat set."""
    drive = run["drive"]
    when = datetime.datetime.fromtimestamp(run["started_at"] or run["created_at"], datetime.UTC)
    serial = drive.get("serial") or os.path.basename(drive.get("path") or "")
    suite = run["suite"] + (f"-repeat{run['times']}" if "times" in run else "")
    parts = (drive.get("model"), serial, suite, when.strftime("%Y%m%dT%H%M%SZ"))
    return "_".join(fat_safe(p) for p in parts) + ".zip"


def _csv(header, rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # CRLF: the CSV dialect spreadsheets expect
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode()


def _json(data):
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


def step_folder(step):
    return f"{step['idx']:02d}-{step['key']}"


def rerun_script(doc):
    """A POSIX sh script that re-runs each fio job file of the run, in order, with plain fio."""
    # Every word that comes from the run document is quoted, and the comment kept on its line: the run
    # may have been imported from someone else's bundle.
    about = zip_safety.CONTROL.sub(" ", f"{doc['id']} ({doc['suite']}, suite sha256 {doc['suite_hash']})")
    lines = [
        "#!/bin/sh",
        f"# Re-run the fio job files of ssdbench run {about}",
        "# with plain fio: sh jobs/rerun.sh /dev/DEVICE [NN-step ...]",
        "# This WRITES TO DEVICE and destroys its data, as the original run did. Steps that were not",
        "# fio jobs (purges, TRIM) are listed but not repeated: result.json says what they did.",
        "# Outputs go to rerun-<UTC time>/NN-step/ beside jobs/.",
        "set -eu",
        '[ $# -ge 1 ] || { echo "usage: sh $0 /dev/DEVICE [NN-step ...]" >&2; exit 2; }',
        "dev=$1",
        "shift",
        'top=$(cd "$(dirname "$0")/.." && pwd)',
        'if [ "${SSDBENCH_CONFIRM:-}" != "$dev" ]; then',
        '\tprintf "This destroys the data on %s. Type the device again to go on: " "$dev"',
        "\tread -r answer",
        '\t[ "$answer" = "$dev" ] || { echo "not confirmed: nothing was written" >&2; exit 1; }',
        "fi",
        'out="$top/rerun-$(date -u +%Y%m%dT%H%M%SZ)"',
        "wanted() {",
        "\t[ $# -eq 0 ] && return 0",
        '\tfor s in "$@"; do [ "$s" = "$step" ] && return 0; done',
        "\treturn 1",
        "}",
        "job() {",
        '\tmkdir -p "$out/$step"',
        "\t# a trace's segments hand over through FIFOs that the appliance makes and holds (start_fifo and",
        "\t# done_fifo, our fio patch's; exec_prerun and exec_postrun on a stock fio): here each starts once the",
        "\t# one before it has ended (stonewall), as plain fio does",
        f"\tsed {' '.join(f'-e {shlex.quote(e)}' for e in RERUN_SED)} \\",
        '\t\t"$top/jobs/$step.fio" > "$out/$step/$step.fio"',
        '\tfor f in "$top/raw/$step"/*.replay; do if [ -e "$f" ]; then cp "$f" "$out/$step/"; fi; done',
        "\t# a trace's replay iologs are kept gzip-compressed",
        '\tfor f in "$top/raw/$step"/*.replay.gz; do',
        '\t\tif [ -e "$f" ]; then gzip -dc "$f" > "$out/$step/$(basename "$f" .gz)"; fi',
        "\tdone",
        '\techo "== $step"',
        '\t(cd "$out/$step" && SSDBENCH_DUT="$dev" fio --output-format=json --output=fio.json "$step.fio")',
        "}",
    ]
    for step in doc["steps"]:
        folder = shlex.quote(step_folder(step))
        if step["job_file"]:
            lines.append(f'step={folder}; if wanted "$@"; then job; fi')
        else:
            skipped = shlex.quote(f"{step['kind']}, not a fio job: skipped")
            lines.append(f'step={folder}; if wanted "$@"; then echo "== $step: "{skipped}; fi')
    lines.append('echo "fio outputs: $out"')
    return ("\n".join(lines) + "\n").encode()


def _raw_files(data_dir, doc):
    """(name in the bundle, path on disk) for the run folder's files."""
    top = store.run_dir(data_dir, doc["id"])
    return [
        (RUN_FILES.get(f["path"], "raw/" + f["path"].replace(os.sep, "/")), os.path.join(top, f["path"]))
        for f in store.run_files(data_dir, doc["id"])
    ]


def _ended(doc, what):
    """The document of a run or a repeat set that has ended, without the fields that only this appliance
    knows (run_schema.LOCAL_FIELDS); `what` names it in the error when there is none, or it has not ended."""
    if doc is None:
        raise SsdbenchError(f"no {what}")
    if doc["state"] in store.ACTIVE:
        raise SsdbenchError(f"{what} is {doc['state']}: bundle it when it has ended")
    for key in run_schema.LOCAL_FIELDS:
        doc.pop(key, None)
    return doc


def members(db, data_dir, run_id):
    """Everything a bundle holds but its manifest: (name, bytes or a file path), and the run document."""
    doc = _ended(document.run_document(db, run_id), f"run {run_id}")
    out = [
        (RESULT, _json(doc)),
        ("drive/identity.json", _json(doc["drive"])),
        ("report.html", offline_report.render(doc)),
        ("jobs/rerun.sh", rerun_script(doc)),
        ("README.txt", (__doc__.split("\n\n")[1] + "\n").encode()),
    ]
    folders = {s["id"]: step_folder(s) for s in doc["steps"]}
    for step in doc["steps"]:
        if step["job_file"]:
            out.append((f"jobs/{folders[step['id']]}.fio", step["job_file"].encode()))
        if step["metrics"]:
            out.append(
                (
                    f"metrics/{folders[step['id']]}.csv",
                    _csv(
                        ("metric", "value", "unit", "source"),
                        ((m["name"], repr(m["value"]), m["unit"], m["source"]) for m in step["metrics"]),
                    ),
                )
            )
    for s in doc["series"]:
        folder = folders.get(s["step_id"], "run")
        out.append(
            (
                f"series/{folder}/{fat_safe(s['name'], 80)}.csv",
                _csv((f"x ({s['x_unit']})", f"{s['name']} ({s['unit']})"), zip(s["x"], map(repr, s["y"]))),
            )
        )
    return out + _raw_files(data_dir, doc), doc


def _copy_hashing(src, dst=None):
    """The sha256 of what `src` holds, copied to `dst` on the way: one read, however large the file."""
    digest = hashlib.sha256()
    for block in iter(lambda: src.read(BLOCK), b""):
        digest.update(block)
        if dst is not None:
            dst.write(block)
    return digest.hexdigest()


def _add(zf, name, content):
    """Add one member (bytes, or a file by its path) and return its sha256."""
    if isinstance(content, bytes):
        zf.writestr(name, content)
        return hashlib.sha256(content).hexdigest()
    with open(content, "rb") as src, zf.open(name, "w", force_zip64=os.path.getsize(content) >= 1 << 31) as dst:
        return _copy_hashing(src, dst)


def repeat_members(db, data_dir, repeat_id):
    """Everything a repeat set's bundle holds but its manifest, and the set's summary document."""
    doc = _ended(repeatability.summary(db, repeat_id), f"repeat set {repeat_id}")
    out = [
        (REPEAT, _json(doc)),
        ("summary.csv", _csv(SUMMARY_COLUMNS, ([_cell(f[c]) for c in SUMMARY_COLUMNS] for f in doc["figures"]))),
        ("README.txt", ("\n\n".join(__doc__.split("\n\n")[1:3]) + "\n").encode()),
    ]
    runs = []
    for r in doc["runs"]:
        files, run_doc = members(db, data_dir, r["id"])
        out += [
            (f"{run_member_prefix(r['position'])}{name}", content) for name, content in files if name != "README.txt"
        ]
        runs.append(run_doc)
    return out, doc, runs


def _cell(value):
    """A summary value for the CSV: numbers at full precision, nothing for none, yes or no for a flag."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else repr(value) if isinstance(value, float) else value


def run_member_prefix(position):
    """Where a repeat set's bundle keeps the files of the run at `position`."""
    return f"run-{position}/"


def write(db, data_dir, run_id, out_dir):
    """Write the run's bundle into out_dir, atomically: under a temporary name, synced, then renamed,
    and the folder synced. Returns its path. A failure (a full disk, a pulled stick) leaves nothing
    under the final name and removes the temporary file when it still can."""
    with store.run_in_use(data_dir, run_id):
        files, doc = members(db, data_dir, run_id)
        manifest = {
            **_manifest_head(doc, doc),
            "run": {"id": doc["id"], "state": doc["state"], "origin": doc["origin"], "host": socket.gethostname()},
        }
        return _write(files, manifest, os.path.join(out_dir, bundle_name(doc)))


def write_repeat(db, data_dir, repeat_id, out_dir):
    """Write a repeat set's bundle into out_dir, as write() does a run's; each of its runs is held in use (no
    delete) while it is read."""
    held = store.get_repeat(db, repeat_id)
    if held is None:
        raise SsdbenchError(f"no repeat set {repeat_id}")
    with ExitStack() as stack:
        for r in held["runs"]:
            stack.enter_context(store.run_in_use(data_dir, r["id"]))
        files, doc, runs = repeat_members(db, data_dir, repeat_id)
        manifest = {
            **_manifest_head(doc, runs[0] if runs else {}),
            "repeat": {
                "id": doc["id"],
                "state": doc["state"],
                "times": doc["times"],
                "origin": doc["origin"],
                "host": socket.gethostname(),
                "runs": [{"id": r["id"], "position": r["position"], "state": r["state"]} for r in doc["runs"]],
            },
        }
        return _write(files, manifest, os.path.join(out_dir, bundle_name(doc)))


def _manifest_head(doc, run):
    """The manifest's fields before what it describes (a run, or a repeat set with `run` its first)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "ssdbench_version": __version__,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "suite": {
            "name": doc["suite"],
            "sha256": doc["suite_hash"],
            "workload_sha256": document.recorded(run, "suite", "workload_sha256"),
            "standard": bool(doc["standard"]),
        },
        "drive": {k: doc["drive"].get(k) for k in ("model", "serial", "firmware", "capacity_bytes", "transport")},
    }


def _write(files, manifest, final):
    out_dir = os.path.dirname(final)
    # A bundle that verify and import would refuse (a large repeat set's) is not written at all.
    total = sum(len(content) if isinstance(content, bytes) else os.path.getsize(content) for _, content in files)
    if len(files) + 1 > zip_safety.MAX_MEMBERS or total > zip_safety.MAX_TOTAL_BYTES:
        raise SsdbenchError(
            f"{os.path.basename(final)} would hold {len(files) + 1} files and {total} bytes, over the "
            f"{zip_safety.MAX_MEMBERS} files or {zip_safety.MAX_TOTAL_BYTES} bytes that verify and import take; "
            "bundle a repeat set's runs one by one instead"
        )
    # The manifest goes in last, so that each file is read once: hashed as it is added.
    tmp = final + ".part"
    try:
        with open(tmp, "wb") as raw:
            with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
                manifest["files"] = {name: _add(zf, name, content) for name, content in files}
                zf.writestr(MANIFEST, _json(manifest))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, final)
        durable.sync_dir(out_dir)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise SsdbenchError(
            f"could not write {os.path.basename(final)} in {out_dir}: "
            f"{exc.strerror or exc}; nothing was left under that name"
        ) from exc
    return final


def verify(path):
    """Check a bundle: every file the manifest lists is there with its hash, and nothing else is.
    Returns the manifest; raises BundleError naming every problem. A zip that is unsafe to read (a name
    reaching outside its folder, a link, too many members or bytes) is refused before any member is read."""
    with open_zip(path) as zf:
        return verify_zip(zf, path)


def open_zip(path):
    """The bundle at `path` opened, once its end records show a member count and a central directory that
    zip_safety allows: zipfile reads the whole directory as it opens a file. Raises BundleError."""
    try:
        problem = zip_safety.directory_problem(path)
        if problem:
            raise BundleError(f"{path}: refused, {problem}")
        return zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise BundleError(f"{path}: not a readable bundle ({exc})") from exc


def verify_zip(zf, path, kept=None):
    """verify() of the open zip of the bundle at `path`. `kept`: a dict naming members (documents the caller
    reads next, each of a size it bounded), given the bytes of each as they were hashed, so that it is
    inflated once (read_documents takes them)."""
    unsafe = zip_safety.problems(zf)
    if unsafe:
        raise BundleError(f"{path}: refused, {len(unsafe)} problem(s):\n" + "\n".join(unsafe))
    names = zf.namelist()
    if MANIFEST not in names:
        raise BundleError(f"{path}: no {MANIFEST}: not an ssdbench bundle")
    try:
        manifest = read_json(zf, MANIFEST, path)
        listed = dict(manifest["files"])
        if not all(isinstance(manifest.get(kind, {}), dict) for kind in ("run", "repeat")):
            raise TypeError("what it describes is not a record")
    except (ValueError, KeyError, TypeError, AttributeError, *DAMAGED) as exc:
        raise BundleError(f"{path}: {MANIFEST} is damaged ({exc})") from exc
    problems = []
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        problems.append(
            f"{MANIFEST}: format {manifest.get('format')} {manifest.get('format_version')}, "
            f"this ssdbench reads {FORMAT} {FORMAT_VERSION}"
        )
    present = set(names) - {MANIFEST}
    problems += [f"{n}: listed in the manifest but missing" for n in sorted(set(listed) - present)]
    problems += [f"{n}: not listed in the manifest (added)" for n in sorted(present - set(listed))]
    for name in sorted(set(listed) & present):
        try:
            if kept is not None and name in kept:
                kept[name] = zf.read(name)
                digest = hashlib.sha256(kept[name]).hexdigest()
            else:
                with zf.open(name) as member:
                    digest = _copy_hashing(member)
        except DAMAGED as exc:
            problems.append(f"{name}: unreadable, damaged ({exc})")
            continue
        if digest != listed[name]:
            problems.append(f"{name}: sha256 {digest[:16]}…, the manifest says {listed[name][:16]}… (changed)")
    if problems:
        raise BundleError(f"{path}: {len(problems)} problem(s):\n" + "\n".join(problems))
    return manifest


def origin(what, about, host, digest):
    """Where an imported run or repeat set came from (`what`: "run" or "repeat set"; `about`: its document, with
    its id and origin), with `digest`, the sha256 of its result.json or repeat.json: stable for one bundle, so
    importing it twice is caught. One imported before keeps its first origin."""
    if about.get("origin", "local") != "local":
        return about["origin"]
    content = "result" if what == "run" else "summary"
    return f"imported: {what} {about['id']} on {host or 'an unnamed host'}, {content} {digest[:16]}"


def _finite(text):
    """A JSON number with a fraction or an exponent, which may read as infinite (1e400). A check as it is parsed
    costs a third of the parse; a regular expression over the text, or a walk of the document, three times it."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"a number that is not finite ({text})")
    return number


def _not_finite(name):
    raise ValueError(f"a number that is not finite ({name})")


def finite_json(data):
    """JSON whose every number is finite: Python's JSON takes NaN, Infinity and 1e400, which no run writes and a
    database cannot index."""
    return json.loads(data, parse_float=_finite, parse_constant=_not_finite)


def read_json(zf, name, path, loads=finite_json, kept=None):
    """A member parsed as JSON by `loads` (finite_json, or a parser as strict: it raises ValueError), read into
    memory only when it is of a sane size; or its bytes as verify_zip `kept` them."""
    content = (kept or {}).get(name)
    if content is None and zf.getinfo(name).file_size > MAX_JSON_BYTES:
        raise BundleError(f"{path}: {name} is over {MAX_JSON_BYTES} bytes, more than any run writes")
    try:
        return loads(zf.read(name) if content is None else content)
    except (ValueError, *DAMAGED) as exc:
        raise BundleError(f"{path}: {name} is damaged ({exc})") from exc


def document_problems(doc):
    """What in an imported run document could reach a file name, the store or rerun.sh unchecked."""
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        return ["it is not a run document"]
    found = []
    if not locked.valid_name(doc.get("suite")):
        found.append(f"suite name {_quoted(doc.get('suite'))} is not lower-case letters, digits and dashes")
    if not (isinstance(doc.get("suite_hash"), str) and re.fullmatch(r"[0-9a-f]{64}", doc["suite_hash"])):
        found.append("suite_hash is not a sha256")
    if doc.get("state") not in store.ENDED:
        found.append(f"state {_quoted(doc.get('state'))} is not one of {', '.join(store.ENDED)}: not a result")
    for i, step in enumerate(doc["steps"]):
        if not isinstance(step, dict):
            found.append(f"step {i} is not an object")
            continue
        if not locked.valid_name(step.get("key")):
            found.append(f"step {i}: key {_quoted(step.get('key'))} is not lower-case letters, digits and dashes")
        if step.get("kind") not in locked.STEP_KINDS:
            found.append(f"step {i}: kind {_quoted(step.get('kind'))} is not one of {', '.join(locked.STEP_KINDS)}")
        if type(step.get("idx")) is not int or not 0 <= step["idx"] < 1000 or type(step.get("id")) is not int:
            found.append(f"step {i}: idx and id must be whole numbers")
    return found


def _quoted(value):
    """A value of an imported document, as a problem quotes it: its start, which is all a reader needs."""
    text = repr(value)
    return text if len(text) <= QUOTED else text[:QUOTED] + "..."


def repeat_problems(doc, names):
    """What in an imported repeat set's document could reach the store unchecked, or names a run the bundle
    does not hold (`names`: its members)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        return ["it is not a repeat set's document"]
    found = document_problems({**doc, "steps": []})
    if type(doc.get("times")) is not int or not 2 <= doc["times"] <= 1000:
        found.append("times must be a whole number from 2 to 1000")
    thresholds = doc.get("thresholds")
    if (
        not isinstance(thresholds, dict)
        or set(thresholds) != set(locked.REPEAT_DEFAULTS)
        or not all(type(v) in (int, float) for v in thresholds.values())
    ):
        found.append(f"thresholds must give {' and '.join(sorted(locked.REPEAT_DEFAULTS))} as numbers")
    positions = [r.get("position") if isinstance(r, dict) else None for r in doc["runs"]]
    if any(type(p) is not int or not 1 <= p <= 1000 for p in positions) or len(set(positions)) < len(positions):
        found.append("each run's position must be a whole number from 1 to 1000, each once")
    else:
        found += [f"run-{p}: no {RESULT}" for p in positions if run_member_prefix(p) + RESULT not in names]
    return found


def documents(path):
    """The run documents a bundle holds, checked as import checks them but stored nowhere: a run's bundle holds
    one; a repeat set's, each of its runs in the set's order. Returns (documents, True for a repeat set)."""
    verify(path)
    with zipfile.ZipFile(path) as zf:
        held, runs = read_documents(zf, path)
    return [doc for _, doc, _ in runs], held is not None


def _unpack(zf, staging, prefix=""):
    """A run folder's files from the bundle (those under `prefix`, in a repeat set's) into staging: each resolved,
    and kept inside it."""
    top = os.path.realpath(staging)
    own = {in_bundle: in_folder for in_folder, in_bundle in RUN_FILES.items()}
    os.makedirs(top)
    for name in zf.namelist():
        if not name.startswith(prefix):
            continue
        inner = name[len(prefix) :]
        target = own.get(inner) or (inner[len("raw/") :] if inner.startswith("raw/") else None)
        if not target:
            continue
        dest = os.path.realpath(os.path.join(top, target))
        if os.path.commonpath([top, dest]) != top or dest == top:
            raise BundleError(f"{name}: would be written outside the run's folder")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        # O_EXCL and O_NOFOLLOW: never through a link, never over a file written before.
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with zf.open(name) as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst)


def read_documents(zf, path, loads=finite_json, kept=None):
    """The documents of a verified bundle's zip, each checked as a result and parsed by `loads` (read_json's,
    as its `kept`): (the repeat set's document or None, [(position in the set or None, run document, its
    members' prefix)]). Raises BundleError naming every problem."""
    names = set(zf.namelist())
    if REPEAT in names:
        held = read_json(zf, REPEAT, path, loads, kept)
        problems = [f"{REPEAT}: {p}" for p in repeat_problems(held, names)]
        positions = [] if problems else [r["position"] for r in held["runs"]]
    else:
        held, problems, positions = None, [], [None]
    runs = []
    for position in positions:
        prefix = run_member_prefix(position) if position else ""
        doc = read_json(zf, prefix + RESULT, path, loads, kept)
        problems += [f"{prefix}{RESULT}: {p}" for p in document_problems(doc)]
        runs.append((position, doc, prefix))
    if problems:
        raise BundleError(f"{path}: refused:\n" + "\n".join(problems))
    return held, runs


def import_bundle(db, data_dir, path):
    """Bring another testbed's bundle in: a run's as a new run, a repeat set's as a new set with every one of its
    runs, each keeping its origin. A bundle that fails verify is refused, and so is one imported before or one
    whose documents are not results. Returns {"run": id}, or {"repeat": id, "runs": [ids, in the set's order]}."""
    manifest = verify(path)
    with zipfile.ZipFile(path) as zf:
        held, runs = read_documents(zf, path)
        host = (manifest.get("repeat") or manifest.get("run") or {}).get("host")
        staging = os.path.join(data_dir, store.RUNS_DIR, ".import")
        shutil.rmtree(staging, ignore_errors=True)
        folders = [os.path.join(staging, str(n)) for n in range(len(runs))]
        try:
            for folder, (_, _, prefix) in zip(folders, runs):
                _unpack(zf, folder, prefix)
            documents = [
                (position, doc, origin("run", doc, host, manifest["files"][prefix + RESULT]))
                for position, doc, prefix in runs
            ]
            if held is None:
                made = {"run": store.import_run(db, documents[0][1], documents[0][2])}
                run_ids = [made["run"]]
            else:
                set_origin = origin("repeat set", held, host, manifest["files"][REPEAT])
                repeat_id, run_ids = store.import_repeat(db, held, documents, set_origin)
                made = {"repeat": repeat_id, "runs": run_ids}
        except (OSError, *DAMAGED) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise BundleError(f"{path}: could not unpack it ({exc}); nothing was imported") from exc
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    for folder, run_id in zip(folders, run_ids):
        os.replace(folder, store.run_dir(data_dir, run_id))
    shutil.rmtree(staging, ignore_errors=True)
    return made

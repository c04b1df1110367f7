"""What README.md and docs/*.md name exists: every `make TARGET` is a target of the Makefile (or buildroot.mk),
every `ssdbench COMMAND ...` a command of the CLI's parser, every repository path in their code a file or folder
of the tree, and every relative link and image a file (and its #heading a heading of it). A rename then fails
make test, not a reader."""

import argparse
import functools
import pathlib
import re
import subprocess

import pytest

from ssdbench import cli

TOP = pathlib.Path(__file__).resolve().parents[2]
DOCS = [TOP / "README.md", *sorted((TOP / "docs").glob("*.md"))]
MAKEFILES = [TOP / "Makefile", TOP / "buildroot.mk"]
# Where a path the docs name may start from: the tree's top (webui/bench/bench_repeat.py), the package's
# project (tests/test_space.py), the package (results/summary.py), the appliance's root file systems
# (etc/init.d/, etc/modules), and the doc's own folder.
BASES = ("", "webui", "webui/ssdbench", "overlay", "board/vm/rootfs")

# A command's words, where a shell would start one: a line's (or a code span's) start, after && || ; | or (,
# past VAR=value assignments and sudo. `make -C DIR ...` is another directory's make (Buildroot's): not checked.
COMMANDS = re.compile(r"&&|\|\||[;|(]")
PREFIX = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+|sudo\s+)*")
WORD = re.compile(r"[a-z][a-z0-9-]*")
# A Makefile's rule line: targets, a colon that is not an assignment's (:=, ::=).
RULE = re.compile(r"^([^\s#=:][^=:]*?)\s*::?(?!=)")
LINK = re.compile(r"!?\[(?:[^\]\n]|\n(?!\n))*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
SPLIT = re.compile(r"[\s'\"`,;|()\[\]=]+")
# A placeholder (<version>, NN-step/*.csv, $PWD/...), an elision, or a thing that is no file of the tree.
NOT_A_PATH = re.compile(r"[<>*$?{}…@%#]|\.\.\.|://")


def split(text):
    """The text's prose (code blocks blanked, line numbers kept) and its code: each fenced block's lines
    (comments dropped), and each inline code span with its white space made one space."""
    prose, code, fence = [], [], None
    for line in text.splitlines():
        mark = re.match(r"\s*(```+|~~~+)", line)
        if fence is None and mark:
            fence = mark.group(1)
            prose.append("")
        elif fence is not None:
            if line.strip().startswith(fence[:3]) and not line.strip().strip(fence[0]):
                fence = None
            else:
                code.append(re.sub(r"(^|\s)#.*", "", line))
            prose.append("")
        else:
            prose.append(line)
    prose = "\n".join(prose)
    spans = [" ".join(m.group(2).split()) for m in re.finditer(r"(`+)(.+?)\1", prose, re.S)]
    return re.sub(r"(`+)(.+?)\1", " ", prose, flags=re.S), code + spans


@functools.cache
def make_targets():
    targets = set()
    for makefile in MAKEFILES:
        for line in makefile.read_text().splitlines():
            rule = RULE.match(line)
            if rule:
                targets.update(t for t in rule.group(1).split() if "$" not in t)
            if line.startswith(".PHONY:"):
                targets.update(line.partition(":")[2].split())
    return frozenset(targets)


@functools.cache
def commands():
    """The CLI's commands as a tree: {"lab": {"token": {"add": {}, ...}, ...}, "runs": {}, ...}."""

    def tree(p):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                return {name: tree(sub) for name, sub in action.choices.items()}
        return {}

    return tree(cli.parser())


@functools.cache
def tracked():
    """The tree: every file git tracks or would (not ignored), and every folder holding one."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=TOP,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tree's files are not known")
    files = set(out.decode().split("\0")) - {""}
    folders = {str(parent) for f in files for parent in pathlib.PurePosixPath(f).parents if str(parent) != "."}
    return frozenset(files), frozenset(folders)


def ignored(path):
    """Whether git ignores the path: a thing a build or a test makes (build/, the vendored uPlot, artifacts)."""
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=TOP).returncode == 0


def join(base, path):
    return str(pathlib.PurePosixPath(base, path)) if base else str(pathlib.PurePosixPath(path))


def invocations(code, program):
    """The words after each `program` that a line of code starts as a command."""
    for line in code.splitlines():
        for command in COMMANDS.split(line):
            words = PREFIX.sub("", command.strip(), count=1).split()
            if words and words[0] == program:
                yield words[1:]


def check_make(code):
    for words in invocations(code, "make"):
        words = [w for w in words if not re.match(r"[A-Za-z_][A-Za-z0-9_]*=", w)]
        if not words or words[0].startswith("-"):
            continue
        target = words[0].rstrip(".,:;)")
        if target not in make_targets():
            yield f"make {target}: no such target in the Makefile or buildroot.mk"


def check_commands(code):
    for words in invocations(code, "ssdbench"):
        node, said = commands(), ["ssdbench"]
        for word in words:
            if not node or not WORD.fullmatch(word):
                break
            if word not in node:
                yield f"{' '.join(said + [word])}: no such command (ssdbench --help)"
                break
            node = node[word]
            said.append(word)


def check_paths(code, folder):
    files, folders = tracked()
    bases = (*BASES, folder)
    for token in SPLIT.split(code):
        token = token.rstrip(".:")
        if "/" not in token or token.startswith(("/", "~", "-", "../")) or NOT_A_PATH.search(token):
            continue
        token = token.removeprefix("./").rstrip("/")
        first = token.split("/")[0]
        if not any(join(base, first) in folders for base in bases):
            continue  # not the tree's: a bundle's member (jobs/rerun.sh), a file on the stick, MB/s
        # A module may be named without its .py (results/store), or with a name in it (system/tools.run).
        names = (token, token + ".py", re.sub(r"\.\w+$", ".py", token))
        if any(join(base, name) in files | folders for base in bases for name in names):
            continue
        if not ignored(token):
            yield f"{token}: no such file or folder in the tree"


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text):
    prose, _ = split(text)
    seen, found = {}, set()
    for line in prose.splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if not count else f"{base}-{count}")
    return found


def check_links(prose, text, doc):
    files, folders = tracked()
    for m in LINK.finditer(prose):
        target = m.group(1)
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        if path:
            resolved = (doc.parent / path).resolve()
            try:
                name = str(resolved.relative_to(TOP))
            except ValueError:
                yield f"{target}: the link leaves the repository"
                continue
            if name not in files | folders:
                yield f"{target}: no such file in the tree"
                continue
            other = resolved.read_text() if anchor and name.endswith(".md") else None
        else:
            other = text
        if anchor and other is not None and anchor not in anchors(other):
            yield f"{target}: no heading #{anchor} there"


def problems(text, doc):
    """Every name in a doc's text that does not exist, as one line each."""
    prose, code = split(text)
    folder = str(doc.parent.relative_to(TOP)) if doc.parent != TOP else ""
    found = []
    for piece in code:
        found += check_make(piece)
        found += check_commands(piece)
        found += check_paths(piece, folder)
    found += check_links(prose, text, doc)
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(TOP)))
def test_what_a_doc_names_exists(doc):
    assert problems(doc.read_text(), doc) == []


def test_the_readme_is_short_and_the_testers_path_comes_first():
    lines = (TOP / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:60])
    for step in ("Secure Boot", "PIN", "Start", "ssdbench-results/"):
        assert step in first_screen


def test_every_image_the_docs_show_is_one_make_screenshots_makes():
    """make screenshots runs the browser test that writes docs/screenshots/, and make test-boot-sb the boot test
    that saves MokManager's screen there: each picture there is one they make, and is shown; no doc shows a
    picture of its own that nothing makes again from the current code."""
    makers = ("webui/tests/browser/test_report_pages.py", "webui/vmtests/test_boot_sb.py")
    made = {name for path in makers for name in re.findall(r"\"([\w-]+\.png)\"", (TOP / path).read_text())}
    kept = {p.name for p in (TOP / "docs" / "screenshots").iterdir()}
    shown = set()
    for doc in DOCS:
        prose, _ = split(doc.read_text())
        for m in LINK.finditer(prose):
            if m.group(0).startswith("!"):
                image = (doc.parent / m.group(1)).resolve()
                assert image.parent == TOP / "docs" / "screenshots", (doc.name, m.group(1))
                shown.add(image.name)
    assert kept == made
    assert shown == made


def test_the_checker_reports_what_does_not_exist():
    doc = TOP / "docs" / "fake.md"
    text = "\n".join(
        [
            "# Fake",
            "Run `make no-such-target`, then `make test` and `SSDBENCH_FUZZ_SEED=7 make test`;",
            "`make -C output menuconfig` is Buildroot's.",
            "```sh",
            "make demo SSDBENCH_HOST_PORT=8081",
            "make no-such-block-target   # make nonsense in a comment is not read",
            "ssdbench lab token add bench-01 --db URL",
            "ssdbench frobnicate --json",
            "ssdbench lab frob",
            "```",
            "`ssdbench suites show smoke`, `ssdbench.auto=smoke`, `board/ssdbench/no-such-file.sh`,",
            "`webui/bench/bench_repeat.py`, `tests/test_space.py`, `results/summary.py`, `etc/init.d/`,",
            "`results/no_such.py`, `jobs/rerun.sh`, `/var/lib/ssdbench`, `output/images/ssdbench-<version>.img`,",
            "`build/vm/demo/`, `SSDBENCH/ssdbench-results/`, `http://10.0.2.2:8090/`, `MB/s`.",
            "[lab](lab.md), [its uploads](lab.md#uploads), [gone](gone.md), [a heading](lab.md#no-such-heading),",
            "![summary](screenshots/run-summary.png), ![missing](screenshots/missing.png), [up](#fake),",
            "[web](https://example.com/x.md), [nowhere](#nowhere).",
        ]
    )
    assert sorted(problems(text, doc)) == sorted(
        [
            "make no-such-target: no such target in the Makefile or buildroot.mk",
            "make no-such-block-target: no such target in the Makefile or buildroot.mk",
            "ssdbench frobnicate: no such command (ssdbench --help)",
            "ssdbench lab frob: no such command (ssdbench --help)",
            "board/ssdbench/no-such-file.sh: no such file or folder in the tree",
            "results/no_such.py: no such file or folder in the tree",
            "gone.md: no such file in the tree",
            "lab.md#no-such-heading: no heading #no-such-heading there",
            "screenshots/missing.png: no such file in the tree",
            "#nowhere: no heading #nowhere there",
        ]
    )


# docs/methodology.md ends with a table of what the suites do, each claim with the tests that prove it.
CLAIMS_HEADING = "## What the suites do, and the test of each"
TEST_NAME = re.compile(r"`(test_[a-z0-9_]+)`")


def claims(text):
    """The rows of the methodology's claims table: (claim, [test names])."""
    section = text.split(CLAIMS_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("|")]
    return [(cells[0].strip(), TEST_NAME.findall(cells[1])) for cells in rows[2:]]


def defined_tests():
    """Every test function of the tree's tests and VM tests."""
    found = set()
    for path in [*(TOP / "webui" / "tests").rglob("*.py"), *(TOP / "webui" / "vmtests").glob("*.py")]:
        found |= set(re.findall(r"^def (test_[a-z0-9_]+)\(", path.read_text(), re.M))
    return found


def test_every_claim_of_what_a_suite_does_names_tests_that_exist():
    rows = claims((TOP / "docs" / "methodology.md").read_text())
    assert len(rows) >= 20, rows
    known = defined_tests()
    assert [claim for claim, tests in rows if not tests] == []
    assert sorted({t for _, tests in rows for t in tests} - known) == []


def test_a_claim_without_a_test_or_with_a_missing_one_is_found():
    text = f"{CLAIMS_HEADING}\n| Claim | Tests |\n|---|---|\n| a | `test_no_such_test` |\n| b | none |\n"
    rows = claims(text)
    assert rows == [("a", ["test_no_such_test"]), ("b", [])]
    assert "test_no_such_test" not in defined_tests()

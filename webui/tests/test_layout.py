"""The package's layout keeps the pipeline's order: every import points from a caller to a part it uses,
never back (docs/architecture.md, "Imports point from the caller to the parts it uses")."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "ssdbench"

# The stages, first to last. A module imports only from its own stage or an earlier one.
STAGES = [
    ("ssdbench", "ssdbench.errors", "ssdbench.human", "ssdbench.system"),
    ("ssdbench.drives",),
    ("ssdbench.suites",),
    ("ssdbench.results.store",),
    ("ssdbench.run",),
    ("ssdbench.results",),
    ("ssdbench.lab",),
    ("ssdbench.web", "ssdbench.appliance", "ssdbench.cli"),
]


def stage(module):
    """The stage of a module: the longest prefix that names it."""
    best, found = -1, None
    for index, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    assert found is not None, f"{module} belongs to no stage: add its folder to STAGES and the architecture"
    return found


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = name if parts[-1] == "__init__" else name.rpartition(".")[0]
        yield name, package, ast.parse(path.read_text())


def imported(package, tree):
    """Every ssdbench module a module imports, as an absolute name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "ssdbench":
                continue
            for alias in node.names:
                yield f"{source}.{alias.name}" if source != "ssdbench" or alias.name != "__version__" else source
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "ssdbench")


def test_every_module_has_a_stage():
    for name, _, _ in modules():
        stage(name)


def test_no_module_imports_from_a_later_stage():
    backwards = []
    for name, package, tree in modules():
        for target in imported(package, tree):
            if stage(target) > stage(name):
                backwards.append(f"{name} imports {target}")
    assert not backwards, "imports that point back up the pipeline:\n" + "\n".join(backwards)


def test_the_rule_catches_a_backward_import():
    # The check itself must be able to fail: the drives reaching for fio's parser, as they once did.
    tree = ast.parse("from ..run import fio_output")
    assert [t for t in imported("ssdbench.drives", tree) if stage(t) > stage("ssdbench.drives.health")] == [
        "ssdbench.run.fio_output"
    ]

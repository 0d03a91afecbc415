"""Tests and the console use the product's public names only (issue 24: "tests
get public fixtures", "tests drive public steps, not `runner._private` names").

A name with a leading underscore is the module's own business: a test or an
edge that reaches for it pins an implementation detail, and breaks (or, worse,
silently stops testing anything) when the module is refactored. The check
walks the syntax tree of tests/*.py and console/*.py and reports:

- `from metastore.x import _y` (and any import of a private product module,
  `from metastore.services._common import ...`);
- `module._y` where `module` is a product module (`services.tasks._enqueue`);
- `monkeypatch.setattr(module, "_y", ...)`, `setattr`/`getattr`/`delattr` of a
  private name on a product module, and the dotted-string forms
  (`monkeypatch.setattr("metastore.x._y", ...)`, `mock.patch("metastore.x._y")`);
- a string equal to a private top-level name of a product module the file
  imports (`STEPS = {"_run_job": compaction}`, patched by a variable's name).

A private attribute of a class or an object (`Model._meta`) is not a module
name and is not reported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("metastore", "console", "workers")
CHECKED = sorted(
    [p for p in (REPO / "tests").glob("*.py")] + [p for p in (REPO / "console").glob("*.py")]
)
# What must stay, each with its reason: (path relative to the repository, the
# dotted name). Keep it short; a new entry needs a reason no public step can meet.
ALLOWED: set[tuple[str, str]] = {
    # Fault injection inside a Spark executor: a phase-2 merge task is made to fail
    # while it reads its partial files, so the real retry path (maxRetry, phase 1
    # not redone) runs. No public step can fail one executor task; a public
    # name for an ingestion job's internals would only exist to be patched.
    ("tests/test_ingest_failures.py", "workers.jobs.ingest._TwoPhase"),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_module(dotted: str) -> bool:
    """Whether `dotted` names a module or package of this repository."""
    parts = dotted.split(".")
    if parts[0] not in PRODUCT:
        return False
    path = REPO.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private_part(dotted: str) -> bool:
    """Whether a dotted product name reaches a private name anywhere along it."""
    parts = dotted.split(".")
    return parts[0] in PRODUCT and any(_private(p) for p in parts[1:])


def _bindings(tree: ast.Module) -> dict[str, str]:
    """Local name -> the product module (or name) an import binds it to."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    bound[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {k: v for k, v in bound.items() if v.split(".")[0] in PRODUCT}


def _dotted(node: ast.AST, bound: dict[str, str]) -> str | None:
    """`services.tasks` -> "metastore.services.tasks" when `services` is an import."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return f"{base}.{node.attr}" if base else None
    return None


def _import_findings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module.split(".")[0] not in PRODUCT:
            return []
        names = [f"{node.module}.{a.name}" for a in node.names]
        return [n for n in names if _private_part(n)]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if _private_part(a.name)]
    return []


def _call_findings(node: ast.Call, bound: dict[str, str]) -> list[str]:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in {"setattr", "getattr", "delattr", "patch", "object"} or not node.args:
        return []
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return [first.value] if _private_part(first.value) else []
    target = _dotted(first, bound)
    if target is None or not _is_module(target) or len(node.args) < 2:
        return []
    attr = node.args[1]
    if isinstance(attr, ast.Constant) and isinstance(attr.value, str) and _private(attr.value):
        return [f"{target}.{attr.value}"]
    return []


def _module_privates(dotted: str) -> set[str]:
    """The private names a product module defines at its top level."""
    path = REPO.joinpath(*dotted.split("."))
    file = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    names: set[str] = set()
    for node in ast.parse(file.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {n for n in names if _private(n)}


def _named_privates(tree: ast.Module, bound: dict[str, str]) -> dict[str, str]:
    """A private name of an imported product module -> its dotted name: a string
    equal to one is a name handed to `setattr`/`getattr` by a variable."""
    named: dict[str, str] = {}
    for module in sorted({m for m in bound.values() if _is_module(m)}):
        for name in _module_privates(module):
            named.setdefault(name, f"{module}.{name}")
    return named


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every private product name the source reaches."""
    tree = ast.parse(source)
    bound = _bindings(tree)
    named = _named_privates(tree, bound)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        names = _import_findings(node)
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = _dotted(node.value, bound)
            if owner is not None and _is_module(owner):
                names = [f"{owner}.{node.attr}"]
        elif isinstance(node, ast.Call):
            names = names + _call_findings(node, bound)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in named:
            names = [named[node.value]]
        found += [(node.lineno, n) for n in names]
    return sorted(set(found))


def test_the_check_sees_a_private_import():
    assert private_uses("from metastore.selectors.timeline import _segment_refs\n") == [
        (1, "metastore.selectors.timeline._segment_refs")
    ]
    assert private_uses("from metastore.services._common import ServiceError\n") == [
        (1, "metastore.services._common.ServiceError")
    ]
    assert private_uses("from metastore.selectors import timeline\n") == []
    assert private_uses("from tests.lockbox_harness import _helper\n") == []


def test_the_check_sees_a_private_module_attribute():
    source = "from metastore import services\nx = services.tasks._enqueue\n"
    assert private_uses(source) == [(2, "metastore.services.tasks._enqueue")]
    source = "import metastore.query\nmetastore.query._idle()\n"
    assert private_uses(source) == [(2, "metastore.query._idle")]
    source = "from metastore.druid import native as n\nn._q(1)\n"
    assert private_uses(source) == [(2, "metastore.druid.native._q")]


def test_the_check_ignores_private_attributes_of_classes_and_objects():
    source = "from metastore.models import Task\nfields = Task._meta.fields\n"
    assert private_uses(source) == []
    assert private_uses("x = obj._cache\nname = module.__name__\n") == []


def test_the_check_sees_a_monkeypatched_private_name():
    source = (
        "from metastore import services\n"
        'monkeypatch.setattr(services.tasks, "_enqueue", None)\n'
        'monkeypatch.setattr("metastore.query._idle", None)\n'
        'monkeypatch.setattr(services.tasks, "RUN_TASK", "x")\n'
    )
    assert private_uses(source) == [
        (2, "metastore.services.tasks._enqueue"),
        (3, "metastore.query._idle"),
    ]


def test_the_check_sees_a_private_name_given_as_a_string():
    source = (
        "from metastore import query\n"
        'STEPS = {"_idle": query}\n'
        "for name, module in STEPS.items():\n"
        "    monkeypatch.setattr(module, name, None)\n"
    )
    assert private_uses(source) == [(2, "metastore.query._idle")]
    assert private_uses('from metastore import query\nx = "_not_defined_there"\n') == []


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tests_and_the_console_use_public_product_names_only(path):
    relative = str(path.relative_to(REPO))
    found = [
        (line, name)
        for line, name in private_uses(path.read_text())
        if (relative, name) not in ALLOWED
    ]
    assert found == [], f"{relative} uses private product names (line, name): {found}"


def test_every_allowed_entry_is_still_needed():
    stale = {
        (relative, name)
        for relative, name in ALLOWED
        if name not in {n for _, n in private_uses((REPO / relative).read_text())}
    }
    assert stale == set(), f"no longer used, drop from ALLOWED: {stale}"

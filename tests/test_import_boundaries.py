"""Boundaries read off the source, beside the purity test (issue 24, SPEC §1):
the metastore imports nothing from the console, and no module takes another
module's private name. `make lint` checks the direction of imports with
import-linter; these walk every file's syntax tree, lazy imports inside
functions included, so they hold without the linter too."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("metastore", "console", "workers")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(*roots: str) -> dict[str, Path]:
    return {
        _module_name(p): p
        for root in roots
        for p in sorted((REPO / root).rglob("*.py"))
        if "migrations" not in p.parts
    }


def _imports(module: str, source: str, is_package: bool) -> list[tuple[str, str | None]]:
    """(imported module, name taken from it or None) for every import statement,
    and for `importlib.import_module("...")` with a literal name."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found += [(base, alias.name) for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, None))
    return found


def _console_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    def is_console(name: str) -> bool:
        return name == "console" or name.startswith("console.")

    return [
        f"{module} imports {target}" + (f".{name}" if name else "")
        for target, name in _imports(module, source, is_package)
        if is_console(target) or (target == "" and name == "console")
    ]


def _private_imports(module: str, source: str, modules: set[str], is_package=False) -> list[str]:
    """A `_name` taken from another module. Allowed: `_name` being itself a module
    (a package's private helper, such as services._common, which import-linter's
    private_modules contract keeps inside its package), and the names of such a
    helper used by the modules of its package (not re-exported by the package)."""
    out = []
    for target, name in _imports(module, source, is_package):
        if not name or not name.startswith("_") or name.startswith("__") or target == module:
            continue
        if target.partition(".")[0] not in PRODUCT:  # the standard library's and others' names
            continue
        parent, _, last = target.rpartition(".")
        helper = last.startswith("_") and module.startswith(parent + ".") and not is_package
        if not helper and f"{target}.{name}" not in modules:
            out.append(f"{module} imports {target}.{name}")
    return out


def test_no_metastore_module_imports_the_console():
    sources = _sources("metastore")
    assert "metastore.services.publish" in sources  # the walk sees the packages
    offending = [
        line
        for module, path in sources.items()
        for line in _console_imports(module, path.read_text(), path.name == "__init__.py")
    ]
    assert offending == []


def test_the_console_check_sees_every_form_of_import():
    lazy = (
        "import importlib\n"
        "from console import roles\n"
        "def f():\n"
        "    import console.settings\n"
        "    from console.api import router\n"
        "    return importlib.import_module('console.views')\n"
        "from metastore import models\n"
    )
    assert _console_imports("metastore.x", lazy) == [
        "metastore.x imports console.roles",
        "metastore.x imports console.settings",
        "metastore.x imports console.api.router",
        "metastore.x imports console.views",
    ]
    assert _console_imports("metastore.x", "from metastore.console_like import y\n") == []


def test_no_product_module_imports_another_modules_private_name():
    sources = _sources(*PRODUCT)
    modules = set(sources)
    offending = [
        line
        for module, path in sources.items()
        for line in _private_imports(
            module, path.read_text(), modules, is_package=path.name == "__init__.py"
        )
    ]
    assert offending == []


def test_the_private_name_check_tells_a_name_from_a_helper_module():
    modules = {"metastore.services._common", "metastore.services.tasks", "metastore.demo"}
    source = (
        "from metastore.demo import _flight\n"
        "from metastore.services import _common\n"
        "from ._common import _chunks_text\n"
        "from metastore.demo import __doc__, flight\n"
        "from re import _parser\n"
    )
    assert _private_imports("metastore.services.tasks", source, modules) == [
        "metastore.services.tasks imports metastore.demo._flight"
    ]
    # outside its package, or re-exported by it, a helper's private name is private
    elsewhere = "from metastore.services._common import _chunks_text\n"
    assert _private_imports("metastore.selectors.x", elsewhere, modules) == [
        "metastore.selectors.x imports metastore.services._common._chunks_text"
    ]
    assert _private_imports("metastore.services", elsewhere, modules, is_package=True) == [
        "metastore.services imports metastore.services._common._chunks_text"
    ]

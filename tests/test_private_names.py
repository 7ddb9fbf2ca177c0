"""No module imports another module's ``_name``.

A leading underscore says "only this module uses it": once another module imports it, renaming or
changing it silently breaks that module, and nothing tells the reader the name is shared.  A
package whose modules need each other's helpers gives them public names (its internal API, as
``federation.scheduler`` does) or moves them into one module.  The project's sources are walked with
``ast`` (``tests/``, migrations and ``.venv`` left out); relative imports are resolved, so
``from .context import _Context`` counts as much as ``from federation.scheduler.context import
_Context``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {"tests", "migrations", ".venv", "node_modules", "static", "templates", "locale"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _sources() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if not SKIPPED_DIRS.intersection(relative.parts) and not relative.parts[0].startswith("."):
            yield path


def _package(relative: Path) -> list[str]:
    """The package a module's relative imports start from."""
    parts = list(relative.with_suffix("").parts)
    return parts[:-1]


def _imported_private_names(relative: Path, tree: ast.AST) -> Iterator[tuple[str, str]]:
    """(module, name) for every ``from module import _name`` and ``import a._b``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(relative)
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                if _private(alias.name) or any(_private(part) for part in module.split(".")):
                    yield module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(part) for part in alias.name.split(".")):
                    yield alias.name, ""


def _violations() -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for path in _sources():
        relative = path.relative_to(ROOT)
        names = set(_imported_private_names(relative, ast.parse(path.read_text(), str(path))))
        if names:
            found[relative.as_posix()] = names
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = {path: sorted(names) for path, names in _violations().items()}
    assert found == {}, "give the name a public one (the package's internal API) or move it into one module"


def test_the_walk_sees_relative_and_absolute_imports() -> None:
    tree = ast.parse("from .context import _Context, prepare\nfrom kube.labels import _aggregate\nimport a._b\n")
    assert set(_imported_private_names(Path("federation/scheduler/batch.py"), tree)) == {
        ("federation.scheduler.context", "_Context"), ("kube.labels", "_aggregate"), ("a._b", ""),
    }

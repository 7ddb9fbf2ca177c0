"""The layering holds: import-linter's contracts (.importlinter), and no import cycle anywhere,
function-local imports included (grimp reads every import statement, not only top-level ones).
Imports under ``if TYPE_CHECKING:`` are left out: they name a type for annotations and never run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kube", "core", "fleet", "nodeconfig", "quotas", "federation", "scheduling", "console", "config", "meridian_cli")


def test_import_linter_contracts_are_kept():
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_module_imports_itself_back():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    cycles = []
    for module in sorted(graph.modules):
        if ".migrations" in module or ".tests" in module:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.split(".")[0] in PACKAGES and imported != module and not imported.startswith(module + "."):
                if not module.startswith(imported + ".") and graph.chain_exists(importer=imported, imported=module):
                    cycles.append(f"{module} -> {imported} -> … -> {module}")
    assert cycles == []

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


def test_every_module_of_a_layered_package_has_a_layer():
    """A module a layers contract does not name is outside it: nothing checks what it imports or
    who imports it (``core.sql``, ``core.metrics``, ``fleet.informer`` … were). A subpackage is
    named as a whole (``plugins``) or module by module (``cpu.views``, ``cpu.store``, …: its
    modules sit on different layers), and then every module of it must be."""
    import configparser
    import re

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    outside = []

    def unnamed(folder: Path, prefix: str, named: set[str]) -> list[str]:
        modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
        packages = {path.name for path in folder.iterdir() if (path / "__init__.py").exists()}
        found = [prefix + name for name in sorted(modules - {"migrations", "templatetags"}) if prefix + name not in named]
        for name in sorted(packages - {"migrations", "templatetags"}):
            if prefix + name in named:
                continue
            if any(layer.startswith(f"{prefix}{name}.") for layer in named):
                found += unnamed(folder / name, f"{prefix}{name}.", named)
            else:
                found.append(prefix + name)
        return found

    for section in config.sections():
        contract = config[section]
        if contract.get("type") != "layers" or "containers" not in contract:
            continue
        named = {name.strip() for line in contract["layers"].splitlines() for name in re.split(r"[:|]", line) if name.strip()}
        for container in contract["containers"].split():
            outside += [f"{container}.{name}" for name in unnamed(ROOT / container.replace(".", "/"), "", named)]
    assert outside == []

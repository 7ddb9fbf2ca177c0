"""Field-level differences between two versions of one thing: revisions and audit entries.

Nested mappings are compared leaf by leaf (``config.reclaimedResourceConfig.enableReclaim``),
everything else as a whole value (a list is one leaf: its order is meaningful). Each change
is ``{"path", "op", "old", "new"}`` with ``op`` one of ``add``, ``remove``, ``change``, in
path order, so the revision diff of every app and the audit detail read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Change = dict[str, Any]


def diff(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, *, path: str = "") -> list[Change]:
    """What changed from ``old`` to ``new`` (``None`` is an empty mapping)."""
    changes: list[Change] = []
    _diff_values(path, old or {}, new or {}, changes)
    return changes


def _diff_values(path: str, old: Any, new: Any, changes: list[Change]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                changes.append({"path": sub, "op": "add", "old": None, "new": new[key]})
            elif key not in new:
                changes.append({"path": sub, "op": "remove", "old": old[key], "new": None})
            else:
                _diff_values(sub, old[key], new[key], changes)
    elif old != new or type(old) is not type(new):
        changes.append({"path": path, "op": "change", "old": old, "new": new})


def shallow(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Every top-level field of either side with ``changed`` set: the audit detail's table."""
    old, new = old or {}, new or {}
    return [{"field": key, "old": old.get(key), "new": new.get(key), "changed": old.get(key) != new.get(key)}
            for key in sorted(set(old) | set(new), key=str)]

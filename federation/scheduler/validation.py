"""``validate_unit``: what would make scheduling fail or surprise, field by field, for the API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kube.labels import validate_label_key, validate_label_value
from kube.taints import EQUAL, EXISTS, TAINT_EFFECTS, TOLERATION_OPERATORS, parse_toleration

from .context import affinity_of, gvk_spellings, placement_of
from .profiles import PROFILES, Profile
from .terms import Term, preference_selector
from .types import SCHEDULING_MODES, SchedulingUnit, UnitError


def _validate_terms(terms: Any, path: str, errors: dict[str, str]) -> None:
    if not isinstance(terms, list):
        errors[path] = "must be a list of cluster selector terms"
        return
    if not terms:
        errors[path] = "an empty list of terms matches no cluster"
        return
    for i, term in enumerate(terms):
        compiled = Term.compile(term)
        if compiled.empty:
            errors[f"{path}[{i}]"] = "a term needs matchExpressions or matchFields (an empty term matches nothing)"
        elif compiled.error:
            errors[f"{path}[{i}]"] = compiled.error


def _validate_affinity(value: Any, errors: dict[str, str]) -> None:
    try:
        affinity = affinity_of(value)
    except (TypeError, AttributeError):
        errors["cluster_affinity"] = "must be an object with required/preferred terms"
        return
    if affinity.required is not None:
        _validate_terms(affinity.required, "cluster_affinity.required", errors)
    for i, term in enumerate(affinity.preferred):
        path = f"cluster_affinity.preferred[{i}]"
        weight = term.get("weight") if isinstance(term, Mapping) else None
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            errors[path] = "weight must be an integer from 1 to 100"
            continue
        try:
            preference_selector(term.get("preference"))
        except UnitError as exc:
            errors[path] = str(exc)


def _validate_tolerations(tolerations: Any, errors: dict[str, str]) -> None:
    for i, tol in enumerate(tolerations or ()):
        path = f"tolerations[{i}]"
        if not isinstance(tol, Mapping):
            errors[path] = "must be an object"
            continue
        operator = tol.get("operator") or EQUAL
        if parse_toleration(tol) is None:
            errors[path] = "key, operator, value and effect must be strings (it tolerates nothing)"
        elif operator not in TOLERATION_OPERATORS:
            errors[path] = f"operator {operator!r} is not Equal or Exists"
        elif (tol.get("effect") or "") not in ("", *TAINT_EFFECTS):
            errors[path] = f"effect {tol.get('effect')!r} is not one of {', '.join(TAINT_EFFECTS)}"
        elif operator == EXISTS and tol.get("value"):
            errors[path] = "value must be empty when operator is Exists"
        elif not tol.get("key") and operator != EXISTS:
            errors[path] = "operator must be Exists when key is empty"
        else:
            _validate_toleration_strings(tol, operator, path, errors)


def _validate_toleration_strings(tol: Mapping[str, Any], operator: str, path: str, errors: dict[str, str]) -> None:
    """Upstream ``ValidateTolerations``: a key is a label key, an ``Equal`` value a label value."""
    key, value = tol.get("key") or "", tol.get("value") or ""
    problems = validate_label_key(key) if key else []
    if problems:
        errors[path] = f"key {key!r}: {'; '.join(problems)}"
    elif operator == EQUAL and (problems := validate_label_value(value)):
        errors[path] = f"value {value!r}: {'; '.join(problems)}"


def _validate_placements(placements: Any, errors: dict[str, str]) -> None:
    for name, value in (placements or {}).items():
        path = f"placements.{name}"
        try:
            p = placement_of(value)
        except TypeError as exc:
            errors[path] = str(exc)
            continue
        if p.weight is not None and p.weight < 0:
            errors[path] = "weight must not be negative"
        elif p.min_replicas < 0:
            errors[path] = "min_replicas must not be negative"
        elif p.max_replicas is not None and p.max_replicas < 0:
            errors[path] = "max_replicas must not be negative"
        elif p.max_replicas is not None and p.min_replicas > p.max_replicas:
            errors[path] = f"min_replicas ({p.min_replicas}) exceeds max_replicas ({p.max_replicas})"


def _validate_selector(selector: Any, errors: dict[str, str]) -> None:
    if not isinstance(selector, Mapping):
        errors["cluster_selector"] = "must map label keys to values"
        return
    for key, value in selector.items():
        problems = validate_label_key(key) or validate_label_value(value)
        if problems:
            errors["cluster_selector"] = f"{key!r}: {'; '.join(problems)}"
            return


def validate_unit(
    unit: SchedulingUnit,
    profile: str | None = None,
    known_profiles: Iterable[str] | Mapping[str, Profile] = PROFILES,
) -> dict[str, str]:
    """Field → message for everything that would make scheduling fail or surprise.

    For the API: an empty dict means the unit is valid. ``profile`` is the
    policy's scheduling profile name, checked against ``known_profiles``.
    """
    errors: dict[str, str] = {}
    if not unit.name:
        errors["name"] = "must not be empty"
    try:
        gvk_spellings(unit.gvk)
    except UnitError as exc:
        errors["gvk"] = str(exc)
    if unit.scheduling_mode not in SCHEDULING_MODES:
        errors["scheduling_mode"] = f"must be one of {', '.join(SCHEDULING_MODES)}"
    if unit.desired_replicas is not None and unit.desired_replicas < 0:
        errors["desired_replicas"] = "must not be negative"
    for resource, amount in unit.resource_request.items():
        if not isinstance(amount, int) or amount < 0:
            errors[f"resource_request.{resource}"] = "must be a non-negative integer"
    _validate_selector(unit.cluster_selector, errors)
    _validate_affinity(unit.cluster_affinity, errors)
    _validate_tolerations(unit.tolerations, errors)
    if unit.max_clusters is not None and unit.max_clusters < 0:
        errors["max_clusters"] = "must not be negative"
    _validate_placements(unit.placements, errors)
    for name, replicas in unit.current_clusters.items():
        if replicas is not None and replicas < 0:
            errors[f"current_clusters.{name}"] = "must not be negative"
    if profile is not None and profile not in known_profiles:
        errors["profile"] = f"unknown scheduling profile {profile!r}"
    return errors

"""Simulation (the seed's 仿真): where would a hypothetical workload land, and what would the
water levels be after? Reads the fleet, writes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext as _

from core.errors import Refused
from kube.limits import deeper_than, too_deep_message

from .models import PropagationPolicy
from .policy import scheduling_unit, validate_propagation
from .reconcile import fleet_snapshot
from .render import clean_template
from .scheduler import GPU_RESOURCE, schedule
from .services import check_policy_namespace, object_errors

_LEVELS = (("cpu", "cpu", 1000), ("memory", "memory", 2**30), ("gpu", GPU_RESOURCE, 1))


def _policy_spec(policy: str | Mapping[str, Any] | None, namespace: str) -> dict[str, Any]:
    if isinstance(policy, Mapping):
        if deeper_than(policy):
            raise Refused.from_errors({"policy": too_deep_message()})
        errors = validate_propagation(policy)
        if errors:
            raise Refused.from_errors({f"policy.{k}": v for k, v in errors.items()})
        return dict(policy)
    if not policy:
        raise Refused.from_errors({"policy": _("name a propagation policy or give a policy spec")})
    check_policy_namespace(str(policy), namespace, "policy")
    ns, _slash, name = str(policy).rpartition("/")
    row = (PropagationPolicy.objects.filter(namespace=ns if "/" in policy else namespace, name=name).first()
           or (None if "/" in policy else PropagationPolicy.objects.filter(namespace="", name=name).first()))
    if row is None:
        raise Refused.from_errors({"policy": _("no propagation policy named %(name)s") % {"name": repr(policy)}})
    return row.spec


def what_if(obj: Any, policy: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The schedule (with its explanation) and per-cluster water levels before and after."""
    errors = object_errors(obj)
    if errors:
        raise Refused.from_errors(errors)
    template = clean_template(obj)
    spec = _policy_spec(policy, template["metadata"].get("namespace") or "")
    unit = scheduling_unit(template, spec)  # keyed namespace/name, as the object would be
    fleet = fleet_snapshot()
    result = schedule(unit, fleet.infos, spec.get("schedulingProfile") or "default")
    levels = []
    for info in fleet.infos:
        replicas = result.clusters.get(info.name)
        copies = unit.desired_replicas or 1 if replicas is None and info.name in result.clusters else (replicas or 0)
        row: dict[str, Any] = {"cluster": info.name, "replicas": replicas if info.name in result.clusters else 0}
        for key, resource, divisor in _LEVELS:
            allocatable = info.allocatable.get(resource, 0)
            before = info.requested.get(resource, 0)
            after = before + copies * unit.resource_request.get(resource, 0)
            row[key] = {
                "allocatable": round(allocatable / divisor, 1),
                "before": round(100.0 * before / allocatable, 1) if allocatable else 0.0,
                "after": round(100.0 * after / allocatable, 1) if allocatable else 0.0,
            }
        levels.append(row)
    return {"schedule": result.to_dict(), "water_levels": levels,
            "request": unit.resource_request, "replicas": unit.desired_replicas}

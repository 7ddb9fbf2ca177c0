"""Changes to the fleet inventory, each audited; and the connector of a cluster.

Cordoning is the cluster's own state (``Cluster.cordoned`` / ``drain``): the federation's
scheduler reads it, and ``fleet.signals.cluster_cordoned`` (sent inside the change's
transaction) lets it reschedule what runs there in the same commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core import concurrency, events, jobs
from core.audit import record_change, snapshot
from core.context import current_actor
from core.errors import Conflict, Refused
from core.models import Job
from core.sql import BATCH
from kube.labels import validate_label_key, validate_label_value

from .connectors.base import Connector, ConnectorError, ServerInfo
from .models import Cluster, Pod, dns_label
from .signals import cluster_cordoned, finished_pods_needed
from .simstore import spec_problems

SYNC_TASK = "fleet.sync_cluster"


def connector_for(cluster: Cluster) -> Connector:
    """The connector a cluster is configured with; ConnectorError(reason="config") when unusable."""
    if cluster.connector == Cluster.ConnectorKind.SIMULATED:
        return _simulated_connector(cluster)
    if cluster.connector == Cluster.ConnectorKind.KUBERNETES:
        return _kubernetes_connector(cluster)
    raise ConnectorError(f"unknown connector kind {cluster.connector!r}", reason="config")


def _simulated_connector(cluster: Cluster) -> Connector:
    from .connectors.simulated import MemoryObjectStore, SimulatedConnector
    from .simstore import DatabaseObjectStore, spec_for

    store = DatabaseObjectStore(cluster) if cluster.pk else MemoryObjectStore()
    return SimulatedConnector(spec_for(cluster), store=store, registered=bool(cluster.pk))


def _kubernetes_connector(cluster: Cluster) -> Connector:
    from core.fields import Undecryptable

    from .connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig

    if isinstance(cluster.credentials, Undecryptable):
        raise ConnectorError("the stored kubeconfig cannot be decrypted with this installation's keys "
                             "(MERIDIAN_ENCRYPTION_KEYS / SECRET_KEY changed); register it again", reason="config")
    settings = cluster.connector_config or {}
    config = KubernetesConnectorConfig(
        kubeconfig_path=settings.get("kubeconfig_path") or None,
        context=settings.get("context") or None,
        in_cluster=bool(settings.get("in_cluster")),
        kubeconfig_content=cluster.credentials or None,
    )
    return KubernetesConnector(config)


def check_connection(cluster: Cluster) -> ServerInfo:
    """Reach the cluster once and say what answered; raises ConnectorError saying why it cannot be reached."""
    connector = connector_for(cluster)
    try:
        return connector.server_info()
    finally:
        connector.close()


def try_connection(values: Mapping[str, Any]) -> ServerInfo:
    """Reach a cluster not registered yet, from the values registering it would take (connector,
    kubeconfig, connector_config), saving nothing: the admin page's "Test connection" and
    ``register_cluster`` refuse an unreachable cluster with the same words."""
    return reach(Cluster(name=values.get("name") or "", labels=values.get("labels") or {},
                         connector=values.get("connector") or Cluster.ConnectorKind.KUBERNETES,
                         connector_config=values.get("connector_config") or {}, credentials=values.get("kubeconfig") or ""))


def reach(cluster: Cluster) -> ServerInfo:
    """``check_connection`` with a failure as a refusal (400, ``connection``) saying why."""
    try:
        return check_connection(cluster)
    except ConnectorError as exc:
        raise Refused(f"connection_{exc.reason}", _("Cannot reach the cluster: %(error)s") % {"error": exc},
                      errors={"connection": [str(exc)]}) from exc


TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
EDITABLE = ("display_name", "labels", "taints", "connector_config", "kubeconfig")


def cluster_errors(values: Mapping[str, Any], instance: Cluster | None = None) -> dict[str, str]:
    """What is wrong with a cluster's fields (the API and the admin pages refuse the same)."""
    errors: dict[str, str] = {}
    if instance is None:
        name = values.get("name")
        try:
            dns_label(name or "")
        except DjangoValidationError as exc:
            errors["name"] = " ".join(exc.messages)
        if values.get("connector") not in Cluster.ConnectorKind.values:
            errors["connector"] = _("Must be one of %(values)s.") % {"values": ", ".join(Cluster.ConnectorKind.values)}
    else:
        if "name" in values and values["name"] != instance.name:
            errors["name"] = _("A cluster cannot be renamed; register it again under the new name.")
        if "connector" in values and values["connector"] != instance.connector:
            errors["connector"] = _("The connector kind cannot change; register a new cluster.")
    if "labels" in values:
        problems = label_problems(values["labels"])
        if problems:
            errors["labels"] = "; ".join(problems)
    if "taints" in values:
        problems = taint_problems(values["taints"])
        if problems:
            errors["taints"] = "; ".join(problems)
    config = values.get("connector_config", {} if instance is None else instance.connector_config)
    if not isinstance(config, Mapping):
        errors["connector_config"] = _("Must be an object.")
    elif values.get("connector", getattr(instance, "connector", None)) == Cluster.ConnectorKind.SIMULATED \
            and "connector_config" in values:
        problems = spec_problems(config)
        if problems:
            errors["connector_config"] = "; ".join(problems)
    return errors


def label_problems(value: Any) -> list[str]:
    if not isinstance(value, Mapping):
        return [_("labels must be an object of key → value")]
    problems = []
    for key, label_value in value.items():
        problems += [_("key %(key)s: %(problem)s") % {"key": repr(key), "problem": m} for m in validate_label_key(key)]
        if not isinstance(label_value, str):
            problems.append(_("value of %(key)s must be a string") % {"key": repr(key)})
        else:
            problems += [_("value of %(key)s: %(problem)s") % {"key": repr(key), "problem": m}
                         for m in validate_label_value(label_value)]
    return problems


def taint_problems(value: Any) -> list[str]:
    if not isinstance(value, list):
        return [_("taints must be a list of {key, value, effect}")]
    problems = []
    for i, taint in enumerate(value):
        if not isinstance(taint, Mapping) or not isinstance(taint.get("key"), str):
            problems.append(_("[%(index)s]: a taint needs a string key") % {"index": i})
            continue
        problems += [f"[{i}].key: {m}" for m in validate_label_key(taint["key"])]
        if taint.get("effect") not in TAINT_EFFECTS:
            problems.append(_("[%(index)s].effect must be one of %(values)s") % {
                "index": i, "values": ", ".join(sorted(TAINT_EFFECTS))})
    return problems


def register_cluster(values: Mapping[str, Any]) -> Cluster:
    """Register a cluster: validated, its connection tried, then saved with its first sync queued."""
    errors = cluster_errors(values)
    if errors:
        raise Refused.from_errors(errors)
    fields = {k: v for k, v in values.items() if k in ("name", "display_name", "labels", "taints", "connector",
                                                        "connector_config")}
    cluster = Cluster(**fields, credentials=values.get("kubeconfig") or "")
    reach(cluster)
    try:
        with transaction.atomic():
            cluster.save()
            record_change(cluster, "create", after=snapshot(cluster))
            request_sync(cluster)
            events.publish("fleet", "cluster.registered", {"cluster": cluster.name})
    except IntegrityError as exc:
        raise Conflict("already_exists", _("A cluster named %(name)s is already registered.") % {"name": repr(cluster.name)},
                       field="name") from exc
    return cluster


def update_cluster(cluster: Cluster, changes: Mapping[str, Any]) -> Cluster:
    errors = cluster_errors(changes, cluster)
    if errors:
        raise Refused.from_errors(errors)
    changes = dict(changes)
    if "kubeconfig" in changes:
        changes["credentials"] = changes.pop("kubeconfig")
    with transaction.atomic():
        locked = Cluster.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        concurrency.check(locked)
        before = snapshot(locked)
        for field, value in changes.items():
            if field in ("display_name", "labels", "taints", "connector_config", "credentials"):
                setattr(locked, field, value)
        locked.save()
        record_change(locked, "update", before=before, after=snapshot(locked))
        events.publish(f"cluster-{locked.name}", "cluster.updated", {"cluster": locked.name})
    return locked


def delete_cluster(cluster: Cluster) -> None:
    with transaction.atomic():
        locked = Cluster.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        concurrency.check(locked)
        record_change(locked, "delete", before=snapshot(locked))
        name = locked.name
        locked.delete()
        events.publish("fleet", "cluster.deleted", {"cluster": name})


def expire_finished_pods(retention: timedelta, now: datetime | None = None) -> int:
    """Delete pods that finished more than ``retention`` ago and that nothing still reads.

    A sync marks a pod that is gone as finished instead of deleting it (quota cash is charged
    for the time it ran); kept for ever, a fleet's churn piled them up (the demo fleet, idle: ~33,000
    rows a day). Per cluster, ``BATCH`` rows a statement, over the (cluster, finished_at) index.
    """
    cutoff = (now or timezone.now()) - retention
    for _receiver, needed in finished_pods_needed.send(sender=Pod):
        if needed is not None:
            cutoff = min(cutoff, needed)
    deleted = 0
    for cluster_id in Cluster.objects.values_list("pk", flat=True):
        while ids := list(Pod.objects.filter(cluster_id=cluster_id, finished_at__lt=cutoff).values_list("pk", flat=True)[:BATCH]):
            deleted += Pod.objects.filter(pk__in=ids).delete()[0]
    return deleted


def request_sync(cluster: Cluster) -> Job:
    """A job for one cluster's sync, sent to the cluster's shard after commit."""
    return jobs.enqueue(SYNC_TASK, cluster.name, requested=True, obj=cluster, params={"cluster": cluster.name})


def cordon(cluster: Cluster, *, drain: bool = False, reason: str = "") -> Cluster:
    """No new replicas go to ``cluster``; with ``drain`` its replicas move to other clusters,
    each workload within its own rollout budget."""
    with transaction.atomic():
        locked = Cluster.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        concurrency.check(locked)
        before = _cordon_state(locked)
        locked.cordoned, locked.drain = True, drain
        locked.cordon_reason, locked.cordoned_by = reason[:500], current_actor().name[:150]
        locked.cordoned_at = locked.cordoned_at if before["cordoned"] else timezone.now()
        locked.save(update_fields=["cordoned", "drain", "cordon_reason", "cordoned_by", "cordoned_at", "updated"])
        record_change(locked, "update", verb="drain" if drain else "cordon", before=before, after=_cordon_state(locked),
                      reason=reason)
        cluster_cordoned.send(sender=Cluster, cluster=locked)
        events.publish(f"cluster-{locked.name}", "cluster.cordoned", {"cluster": locked.name, "drain": drain})
        events.publish("fleet", "cluster.cordoned", {"cluster": locked.name, "drain": drain})
    return locked


def uncordon(cluster: Cluster, *, reason: str = "") -> Cluster:
    """Take new replicas again (replicas drained away do not move back by themselves)."""
    with transaction.atomic():
        locked = Cluster.objects.select_for_update(no_key=True).get(pk=cluster.pk)
        concurrency.check(locked)
        if not locked.cordoned:
            return locked
        before = _cordon_state(locked)
        locked.cordoned, locked.drain, locked.cordon_reason, locked.cordoned_by, locked.cordoned_at = False, False, "", "", None
        locked.save(update_fields=["cordoned", "drain", "cordon_reason", "cordoned_by", "cordoned_at", "updated"])
        record_change(locked, "update", verb="uncordon", before=before, after=_cordon_state(locked), reason=reason)
        cluster_cordoned.send(sender=Cluster, cluster=locked)
        events.publish(f"cluster-{locked.name}", "cluster.cordoned", {"cluster": locked.name, "drain": False,
                                                                       "uncordoned": True})
        events.publish("fleet", "cluster.cordoned", {"cluster": locked.name, "drain": False, "uncordoned": True})
    return locked


def _cordon_state(cluster: Cluster) -> dict[str, Any]:
    return {"cordoned": cluster.cordoned, "drain": cluster.drain, "reason": cluster.cordon_reason}

"""The kinds ``get`` and ``describe`` know: where each lives in the REST API, how a user names
one, which columns its table shows, and the websocket topic ``--watch`` follows.

A kind addressed by name in the API (``/fleet/clusters/<name>/``) is fetched directly; one
addressed by id is found by listing with the filters its reference implies (``TYPE/NAME`` for
a config target, ``[NAMESPACE/]KIND/NAME`` for a federated object) and matching exactly, so a
user never needs an id (an id still works).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .client import Client


class NotFoundError(Exception):
    """No object (or more than one) answers a reference; the message says which and why."""


def dig(item: Mapping[str, Any], path: str) -> Any:
    """``dig(row, "status.readyReplicas")``: None when any step is missing."""
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


@dataclass(frozen=True)
class Column:
    header: str
    value: str | Callable[[Mapping[str, Any]], Any]
    wide: bool = False

    def of(self, item: Mapping[str, Any]) -> str:
        value = self.value(item) if callable(self.value) else dig(item, self.value)
        return cell(value)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "<none>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "<none>"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) or "<none>"
    return str(value)


#: A reference → (list filters, exact-match test on a listed item).
Finder = Callable[[str, Mapping[str, str]], tuple[dict[str, str], Callable[[Mapping[str, Any]], bool]]]


@dataclass(frozen=True)
class Resource:
    """One kind as the command line shows it (see the module docstring)."""

    name: str
    singular: str
    aliases: tuple[str, ...]
    paths: tuple[str, ...]
    columns: tuple[Column, ...]
    display: Callable[[Mapping[str, Any]], str]
    by_name: bool = False
    finder: Finder | None = None
    reference: str = "NAME"
    label_selector: bool = False
    namespaced: bool = False
    cluster_filter: bool = False
    topic: str | None = None
    #: The ``meridian.io/v1`` kind ``export``/``apply`` use for it, if it is configuration.
    document_kind: str | None = None
    help: str = ""
    list_params: Mapping[str, str] = field(default_factory=dict)

    def detail_path(self, item_or_name: Mapping[str, Any] | str, base: str | None = None) -> str:
        base = base or self.paths[0]
        if isinstance(item_or_name, Mapping):
            key = item_or_name.get("name") if self.by_name else item_or_name.get("id")
            return f"{base}{key}/"
        return f"{base}{item_or_name}/"

    def list(self, client: Client, params: Mapping[str, Any], *, limit: int | None = None) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for base in self.paths:
            rows += list(client.items(base, {**self.list_params, **params}, limit=limit))
        return rows

    def find(self, client: Client, reference: str, options: Mapping[str, str]) -> dict[str, Any]:
        """The object a user's reference names, as its detail endpoint shows it."""
        from .client import ApiError

        if self.by_name:
            for base in self.paths:
                try:
                    return client.get(self.detail_path(reference, base))
                except ApiError as exc:
                    if exc.status != 404:
                        raise
            raise NotFoundError(f"{self.singular} {reference!r} not found")
        if reference.isdigit() and self.name != "downgrades":  # a number is an id (downgrades are listed only)
            try:
                return client.get(self.detail_path(reference))
            except ApiError as exc:
                if exc.status != 404:
                    raise
                raise NotFoundError(f"{self.singular} {reference} not found") from exc
        if self.finder is None:
            raise NotFoundError(f"{self.singular}s are named by id; see `meridian get {self.name}`")
        params, matches = self.finder(reference, options)
        found = [row for row in self.list(client, params) if matches(row)]
        if not found:
            raise NotFoundError(f"{self.singular} {reference!r} not found")
        if len(found) > 1:
            names = ", ".join(self.display(row) for row in found[:5])
            raise NotFoundError(f"{reference!r} names {len(found)} {self.name} ({names}); say which ({self.reference})")
        if self.name == "downgrades":
            return found[0]
        return client.get(self.detail_path(found[0]))


# ---------------------------------------------------------------------------- finders

def _split(reference: str, parts: int) -> list[str]:
    """``a/b/c`` → the last ``parts`` pieces, missing leading ones as ""."""
    pieces = reference.split("/")
    if len(pieces) > parts:
        raise NotFoundError(f"{reference!r}: too many '/' in the reference")
    return [""] * (parts - len(pieces)) + pieces


def _workload_finder(reference: str, options: Mapping[str, str]):
    cluster, namespace, name = _split(reference, 3)
    cluster, namespace = cluster or options.get("cluster", ""), namespace or options.get("namespace", "")
    params = {"name": name} | ({"cluster": cluster} if cluster else {}) | ({"namespace": namespace} if namespace else {})
    return params, lambda row: row["name"] == name


def _target_finder(reference: str, options: Mapping[str, str]):
    config_type, name = _split(reference, 2)
    config_type = config_type or options.get("type", "")
    return {"type": config_type} if config_type else {}, lambda row: row["name"] == name


def _node_finder(reference: str, options: Mapping[str, str]):
    cluster, name = _split(reference, 2)
    cluster = cluster or options.get("cluster", "")
    return ({"cluster": cluster} if cluster else {}) | {"name": name}, lambda row: row["name"] == name


def _namespaced_finder(reference: str, options: Mapping[str, str]):
    namespace, name = _split(reference, 2)
    namespace = namespace or options.get("namespace", "")
    return ({"namespace": namespace} if namespace or "/" in reference else {}) | {"name": name}, \
        lambda row: row["name"] == name and (not (namespace or "/" in reference) or row.get("namespace", "") == namespace)


def _object_finder(reference: str, options: Mapping[str, str]):
    pieces = reference.split("/")
    namespace = options.get("namespace", "")
    if len(pieces) == 3:
        namespace, kind, name = pieces
    elif len(pieces) == 2:
        kind, name = pieces
    else:
        kind, name = "", pieces[0]
    params = {"search": name} | ({"namespace": namespace} if namespace else {}) | ({"kind": kind} if kind else {})
    return params, lambda row: row["name"] == name and (not kind or row["kind"] == kind) and \
        (not namespace or row["namespace"] == namespace)


def _downgrade_finder(reference: str, options: Mapping[str, str]):
    return {}, lambda row: row["name"] == reference or str(row["id"]) == reference


def _ratio(done: str, total: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda item: f"{dig(item, done) or 0}/{dig(item, total) or 0}"


def _replicas(item: Mapping[str, Any]) -> str:
    """Ready / desired replicas; nothing for an object without replicas (a ConfigMap)."""
    desired = dig(item, "status.desiredReplicas")
    return "" if desired is None else f"{dig(item, 'status.readyReplicas') or 0}/{desired}"


def _used_hard(key: str) -> Callable[[Mapping[str, Any]], str]:
    def show(item: Mapping[str, Any]) -> str:
        hard = (item.get("hard") or {}).get(key)
        return f"{(item.get('used') or {}).get(key, '0')}/{hard}" if hard is not None else ""
    return show


def _scope(item: Mapping[str, Any]) -> str:
    parts = [f"cluster={item['cluster']}" if item.get("cluster") else "fleet"]
    if item.get("node_label_selector"):
        parts.append(item["node_label_selector"])
    return " ".join(parts)


# ---------------------------------------------------------------------------- the kinds

RESOURCES: tuple[Resource, ...] = (
    Resource("clusters", "cluster", ("cluster", "cl"), ("fleet/clusters/",), by_name=True, label_selector=True, topic="fleet",
             display=lambda r: r["name"], document_kind="Cluster", help="member clusters",
             columns=(Column("NAME", "name"), Column("READY", "ready"), Column("CONNECTOR", "connector"),
                      Column("NODES", _ratio("ready_node_count", "node_count")), Column("CORDONED", "cordoned"),
                      Column("LAST-SYNC", "last_sync"), Column("VERSION", "kubernetes_version", wide=True),
                      Column("LABELS", "labels", wide=True))),
    Resource("nodes", "node", ("node", "no"), ("fleet/nodes/",), finder=_node_finder, reference="[CLUSTER/]NAME",
             label_selector=True, cluster_filter=True, display=lambda r: f"{r['cluster']}/{r['name']}", help="nodes of every cluster",
             columns=(Column("CLUSTER", "cluster"), Column("NAME", "name"), Column("READY", "ready"),
                      Column("CPU-MILLI", _ratio("cpu_requested_milli", "cpu_allocatable_milli")),
                      Column("PODS", _ratio("pod_count", "pods_allocatable")),
                      Column("UNSCHEDULABLE", "unschedulable", wide=True), Column("LABELS", "labels", wide=True))),
    Resource("workloads", "workload", ("workload", "wl"), ("fleet/workloads/",), finder=_workload_finder,
             reference="[CLUSTER/][NAMESPACE/]NAME", label_selector=True, namespaced=True, cluster_filter=True,
             display=lambda r: f"{r['cluster']}/{r['namespace']}/{r['kind']}/{r['name']}", help="workloads of every cluster",
             columns=(Column("CLUSTER", "cluster"), Column("NAMESPACE", "namespace"), Column("KIND", "kind"),
                      Column("NAME", "name"), Column("READY", _ratio("ready_replicas", "replicas")),
                      Column("STATUS", "status"), Column("CPU-MILLI", "cpu_request_milli", wide=True),
                      Column("LABELS", "labels", wide=True))),
    Resource("pods", "pod", ("pod", "po"), ("fleet/pods/",), finder=_workload_finder, reference="[CLUSTER/][NAMESPACE/]NAME",
             label_selector=True, namespaced=True, cluster_filter=True,
             display=lambda r: f"{r['cluster']}/{r['namespace']}/{r['name']}", help="pods of every cluster",
             list_params={"active": "true"},
             columns=(Column("CLUSTER", "cluster"), Column("NAMESPACE", "namespace"), Column("NAME", "name"),
                      Column("NODE", "node_name"), Column("PHASE", "phase"), Column("OWNER", "owner_name", wide=True),
                      Column("CPU-MILLI", "cpu_request_milli", wide=True), Column("LABELS", "labels", wide=True))),
    Resource("configtypes", "configtype", ("configtype", "ct"), ("nodeconfig/types/",), by_name=True,
             display=lambda r: r["name"], document_kind="ConfigType", help="node config types (KCC)",
             columns=(Column("NAME", "name"), Column("GVR", "gvr"), Column("DEFAULT-HASH", "default_hash"),
                      Column("DESCRIPTION", "description", wide=True))),
    Resource("targets", "target", ("target", "configtargets", "configtarget", "tg"), ("nodeconfig/targets/",),
             finder=_target_finder, reference="[TYPE/]NAME", cluster_filter=True, topic="nodeconfig",
             display=lambda r: f"{r['type']}/{r['name']}", document_kind="ConfigTarget", help="node config targets",
             columns=(Column("TYPE", "type"), Column("NAME", "name"), Column("MODE", "mode"), Column("PRIORITY", "priority"),
                      Column("MATCHED", "matched_node_count"), Column("REVISION", "revision"),
                      Column("ROLLOUT", "rollout_state"), Column("CLUSTER", "cluster", wide=True),
                      Column("SELECTOR", "node_label_selector", wide=True), Column("HASH", "config_hash", wide=True),
                      Column("PAUSED", "paused", wide=True))),
    Resource("nodeconfigs", "nodeconfig", ("nodeconfig", "nc"), ("nodeconfig/node-configs/",), cluster_filter=True,
             display=lambda r: f"{r['cluster']}/{r['node']}/{r['type']}", help="what each node runs, per config type",
             columns=(Column("CLUSTER", "cluster"), Column("NODE", "node"), Column("TYPE", "type"), Column("TARGET", "target"),
                      Column("REVISION", "revision"), Column("STATE", "state"), Column("HASH", "config_hash", wide=True),
                      Column("APPLIED", "applied_hash", wide=True), Column("ERROR", "error", wide=True))),
    Resource("downgrades", "downgrade", ("downgrade", "dg"), ("nodeconfig/emergency-downgrade/",), finder=_downgrade_finder,
             topic="nodeconfig", display=lambda r: r["name"], help="active emergency downgrades",
             columns=(Column("ID", "id"), Column("NAME", "name"), Column("SCOPE", _scope),
                      Column("ACKNOWLEDGED", _ratio("progress.applied", "progress.targeted")),
                      Column("DELIVERY", "progress.delivery"), Column("CREATED", "created", wide=True))),
    Resource("quotagroups", "quotagroup", ("quotagroup", "qg", "quota"), ("quotas/groups/",), by_name=True, topic="quotas",
             display=lambda r: r["name"], document_kind="QuotaGroup", help="quota groups (bizrq)",
             columns=(Column("NAME", "name"), Column("PARENT", "parent"), Column("CPU", _used_hard("limits.cpu")),
                      Column("MEMORY", _used_hard("limits.memory")), Column("PODS", _used_hard("pods")),
                      Column("HARD", "hard", wide=True), Column("OWNERS", "owners", wide=True))),
    Resource("quotaworkloads", "quotaworkload", ("quotaworkload", "qw", "charges"), ("quotas/charges/",),
             display=lambda r: f"{r['cluster']}/{r['namespace']}/{r['kind']}/{r['name']}", help="workloads charged to quota groups",
             columns=(Column("GROUP", "group"), Column("CLUSTER", "cluster"), Column("NAMESPACE", "namespace"),
                      Column("KIND", "kind"), Column("NAME", "name"), Column("REPLICAS", "replicas"),
                      Column("SOURCE", "source"), Column("CHARGE", "charge", wide=True))),
    Resource("federatedobjects", "federatedobject", ("federatedobject", "fo"), ("federation/objects/",),
             finder=_object_finder, reference="[NAMESPACE/][KIND/]NAME", namespaced=True, topic="federation",
             display=lambda r: "/".join(p for p in (r["namespace"], r["kind"], r["name"]) if p),
             document_kind="FederatedObject", help="federated objects (KubeAdmiral)",
             columns=(Column("NAMESPACE", "namespace"), Column("KIND", "kind"), Column("NAME", "name"),
                      Column("REVISION", "revision"), Column("PHASE", "phase"),
                      Column("READY", _replicas),
                      Column("PLACEMENT", "placement", wide=True), Column("POLICY", "policies.propagation", wide=True))),
    Resource("propagationpolicies", "propagationpolicy", ("propagationpolicy", "pp"), ("federation/propagation-policies/",),
             finder=_namespaced_finder, reference="[NAMESPACE/]NAME", namespaced=True,
             display=lambda r: f"{r['namespace']}/{r['name']}" if r["namespace"] else r["name"],
             document_kind="PropagationPolicy", help="propagation policies",
             columns=(Column("NAMESPACE", "namespace"), Column("NAME", "name"), Column("MODE", "spec.schedulingMode"),
                      Column("OBJECTS", "object_count"), Column("DESCRIPTION", "description", wide=True))),
    Resource("overridepolicies", "overridepolicy", ("overridepolicy", "op"), ("federation/override-policies/",),
             finder=_namespaced_finder, reference="[NAMESPACE/]NAME", namespaced=True,
             display=lambda r: f"{r['namespace']}/{r['name']}" if r["namespace"] else r["name"],
             document_kind="OverridePolicy", help="override policies",
             columns=(Column("NAMESPACE", "namespace"), Column("NAME", "name"), Column("OBJECTS", "object_count"),
                      Column("DESCRIPTION", "description", wide=True))),
    Resource("schedulingpolicies", "schedulingpolicy", ("schedulingpolicy", "sp"), ("scheduling/policies/",), by_name=True,
             topic="scheduling", display=lambda r: r["name"], document_kind="SchedulingPolicy", help="scheduling policies",
             columns=(Column("NAME", "name"), Column("DEFAULT", "is_default"), Column("REVISION", "revision"),
                      Column("DESCRIPTION", "description", wide=True))),
    Resource("templates", "template", ("template", "tpl"),
             ("scheduling/node-scheduler-configs/", "scheduling/pod-scheduler-configs/"), by_name=True, topic="scheduling",
             display=lambda r: r["name"], help="scheduling templates (NodeSchedulerConfig and PodSchedulerConfig)",
             columns=(Column("KIND", "kind"), Column("NAME", "name"), Column("REVISION", "revision"),
                      Column("PLACEHOLDERS", "placeholders"), Column("DESCRIPTION", "description", wide=True))),
    Resource("nodeschedulerconfigs", "nodeschedulerconfig", ("nodeschedulerconfig", "nsc"),
             ("scheduling/node-scheduler-configs/",), by_name=True, topic="scheduling", display=lambda r: r["name"],
             document_kind="NodeSchedulerConfig", help="node scheduling templates",
             columns=(Column("NAME", "name"), Column("REVISION", "revision"), Column("PLACEHOLDERS", "placeholders"))),
    Resource("podschedulerconfigs", "podschedulerconfig", ("podschedulerconfig", "psc"),
             ("scheduling/pod-scheduler-configs/",), by_name=True, topic="scheduling", display=lambda r: r["name"],
             document_kind="PodSchedulerConfig", help="pod scheduling templates",
             columns=(Column("NAME", "name"), Column("REVISION", "revision"), Column("PLACEHOLDERS", "placeholders"))),
    Resource("bindings", "binding", ("binding", "scb", "schedulerconfigbindings"), ("scheduling/bindings/",),
             finder=_namespaced_finder, reference="[NAMESPACE/]NAME", namespaced=True, topic="scheduling",
             display=lambda r: f"{r['namespace']}/{r['name']}" if r["namespace"] else r["name"],
             document_kind="SchedulerConfigBinding", help="scheduler config bindings",
             columns=(Column("NAMESPACE", "namespace"), Column("NAME", "name"), Column("REVISION", "revision"),
                      Column("NODE-TEMPLATE", "spec.nodeSchedulerConfig.name"),
                      Column("POD-TEMPLATE", "spec.podSchedulerConfig.name"), Column("SELECTOR", "spec.selector", wide=True))),
    Resource("cpuallocations", "cpuallocation", ("cpuallocation", "cpualloc"), ("scheduling/cpu/allocations/",),
             display=lambda r: f"{r['cluster']}/{r['node_name']}/{r['namespace']}/{r['name']}", help="CPU allocations",
             columns=(Column("CLUSTER", "cluster"), Column("NODE", "node_name"), Column("NAMESPACE", "namespace"),
                      Column("POD", "name"), Column("MODE", "mode"), Column("CPUS", "cpuset"), Column("DELIVERY", "delivery"),
                      Column("STRATEGY", "strategy", wide=True), Column("REQUEST-MILLI", "request_milli", wide=True))),
    Resource("jobs", "job", ("job",), ("core/jobs/",), display=lambda r: str(r["id"]), help="background jobs",
             list_params={"ordering": "-created"},
             columns=(Column("ID", "id"), Column("KIND", "kind"), Column("STATUS", "status"), Column("CREATED", "created"),
                      Column("FINISHED", "finished"), Column("WAITING-FOR", "waiting_for", wide=True),
                      Column("ERROR", "error", wide=True))),
    Resource("audit", "auditentry", ("auditlog", "auditentry"), ("core/audit-log/",), display=lambda r: str(r["id"]),
             help="the audit log", list_params={"ordering": "-time"},
             columns=(Column("ID", "id"), Column("TIME", "time"), Column("ACTOR", "actor"), Column("ACTION", "action"),
                      Column("VERB", "verb"), Column("OBJECT", "object_repr"), Column("TYPE", "object_type", wide=True),
                      Column("SOURCE", "source", wide=True), Column("REASON", "reason", wide=True))),
    Resource("tokens", "token", ("token",), ("auth/tokens/",), display=lambda r: str(r["id"]), help="your API tokens",
             columns=(Column("ID", "id"), Column("NAME", "name"), Column("PREFIX", "key_prefix"),
                      Column("WRITE", "write_enabled"), Column("EXPIRES", "expires"), Column("LAST-USED", "last_used"))),
)

BY_NAME: dict[str, Resource] = {}
for _resource in RESOURCES:
    for _key in (_resource.name, *_resource.aliases):
        BY_NAME[_key] = _resource


def resource(name: str) -> Resource:
    """A kind by its name, singular or short name (``clusters``, ``cluster``, ``cl``)."""
    found = BY_NAME.get(name.lower())
    if found is None:
        raise NotFoundError(f"unknown kind {name!r}; one of: {', '.join(r.name for r in RESOURCES)}")
    return found

"""Member clusters as ``meridian.io/v1`` documents (``core.documents``), written through
``fleet.services`` like the REST API: ``spec.display_name``, ``labels``, ``taints``,
``connector`` (immutable) and ``connector_config`` (non-secret settings: a simulated
cluster's seed, a kubeconfig path or context, in-cluster).

Credentials are never exported: a document may carry ``spec.kubeconfig`` to register a new
``kubernetes`` cluster (its connection is tried first, as registering through the API does),
but it is write-only, not compared, and ignored for a cluster that exists — change a
kubeconfig with ``PATCH /api/v1/fleet/clusters/<name>/``. Cordoning and draining are
operations, not configuration.
"""

from __future__ import annotations

from typing import Any

from core.documents import Document, DocumentKind, Rendered, only_fields, register
from core.errors import Refused

from . import services
from .models import Cluster

SPEC = ("display_name", "labels", "taints", "connector", "connector_config")


def _render(cluster: Cluster) -> Rendered:
    return Rendered(name=cluster.name, spec={"display_name": cluster.display_name, "labels": dict(cluster.labels),
                                             "taints": list(cluster.taints), "connector": cluster.connector,
                                             "connector_config": dict(cluster.connector_config)})


def _normalize(document: Document, live: Cluster | None) -> dict[str, Any]:
    only_fields(document, (*SPEC, "kubeconfig"), required=("connector",))
    spec = document.spec
    values = {"name": document.name, "display_name": spec.get("display_name") or "", "labels": spec.get("labels") or {},
              "taints": spec.get("taints") or [], "connector": spec.get("connector"),
              "connector_config": spec.get("connector_config") or {}}
    errors = services.cluster_errors(values, live)
    if errors:
        raise Refused.from_errors(errors)
    return {key: values[key] for key in SPEC}


def _save(document: Document, spec: dict[str, Any], live: Cluster | None, reason: str) -> Cluster:
    if live is None:
        return services.register_cluster({"name": document.name, **spec, "kubeconfig": document.spec.get("kubeconfig") or ""})
    return services.update_cluster(live, {key: spec[key] for key in SPEC if key != "connector"})


CLUSTER = DocumentKind(
    kind="Cluster", model=Cluster, order=10, described=False,
    find=lambda d: Cluster.objects.filter(name=d.name).first(),
    render=_render, normalize=_normalize, save=_save,
    remove=lambda cluster, reason: services.delete_cluster(cluster),
    listing=lambda: Cluster.objects.order_by("name"),
)


def register_documents() -> None:
    register(CLUSTER)

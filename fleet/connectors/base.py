"""The connector interface every member cluster is reached through.

Connectors speak Kubernetes API objects as plain dicts in API JSON casing (what
``kubectl get -o json`` prints), for built-in kinds and custom resources alike, so the
inventory sync converts objects in one place whichever connector produced them.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

#: Workload kinds the inventory mirrors, as (apiVersion, kind).
WORKLOAD_KINDS: tuple[tuple[str, str], ...] = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
)


class ConnectorError(Exception):
    """A cluster could not be reached or refused a request; the message is shown to users.

    ``reason`` is one of: ``config`` (bad kubeconfig/settings), ``unreachable``,
    ``unauthorized``, ``forbidden``, ``not_found``, ``conflict``, ``invalid``, ``server``.
    Messages never contain credentials.
    """

    #: Reasons that may go away by themselves: background work retries them (``core.taskbase``).
    TRANSIENT_REASONS = frozenset({"unreachable", "server", "conflict", "throttled"})

    def __init__(self, message: str, *, reason: str = "server", status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status

    @property
    def transient(self) -> bool:
        return self.reason in self.TRANSIENT_REASONS


@dataclass(frozen=True)
class ServerInfo:
    kubernetes_version: str
    #: ``group/version/resource`` strings (``v1/nodes`` for the core group), sorted.
    api_resources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ObjectList:
    items: list[dict[str, Any]]
    resource_version: str = ""


@dataclass(frozen=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: dict[str, Any] = field(default_factory=dict)


class Connector(abc.ABC):
    """Reach one member cluster. Implementations must be safe to create per task."""

    kind: str = ""
    #: Called between the units of a long read (a page of a list, a simulated workload's pods):
    #: it raises to stop the read. A sync sets it to its job's ``checkpoint``, so a canceled
    #: sync of a large cluster stops within a second instead of after the whole read.
    between: Callable[[], None] | None = None

    @abc.abstractmethod
    def server_info(self) -> ServerInfo:
        """Version and served API resources; raises ConnectorError when unreachable."""

    def one_moment(self) -> AbstractContextManager[None]:
        """Reads in the block see the cluster at one moment where the connector can say so (a
        simulation: the tick the block began at); a real API server's lists are each as of
        their own time."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def list(
        self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str = ""
    ) -> ObjectList:
        """All objects of a kind (every namespace unless ``namespace``)."""

    @abc.abstractmethod
    def watch(
        self, api_version: str, kind: str, *, resource_version: str = "", timeout_seconds: int = 30
    ) -> Iterator[WatchEvent]:
        """Changes after ``resource_version``, ending after ``timeout_seconds``."""

    @abc.abstractmethod
    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""

    @abc.abstractmethod
    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        """Create or update ``obj`` (server-side apply where the server supports it)."""

    @abc.abstractmethod
    def apply_status(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        """Write ``obj``'s ``status`` through the status subresource, where an API server keeps
        the status of a resource that declares one (every Katalyst CRD does): a write to the main
        resource drops it there. The object must exist. Returns the object as stored."""

    @abc.abstractmethod
    def patch(
        self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str | None = None,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
    ) -> dict[str, Any]:
        """Patch an object; raises ConnectorError(reason="not_found") when it does not exist."""

    @abc.abstractmethod
    def delete(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> bool:
        """Delete an object; False when it did not exist."""

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj`` as a POST does (an Event, say): ConnectorError(reason="conflict",
        status=409) when it exists. Connectors that cannot create raise reason="invalid"."""
        raise ConnectorError(f"a {self.kind or 'this'} cluster does not take created objects", reason="invalid")

    def bind(self, namespace: str, name: str, node: str, *, uid: str = "") -> None:
        """Assign a pending pod to ``node`` through its ``binding`` subresource, as
        kube-scheduler's DefaultBinder does (with the pod's ``uid`` as a precondition when
        given). The API server refuses with 409 (reason "conflict") a pod already assigned,
        being deleted or replaced by another of the same name, and 404 a pod that is gone."""
        raise ConnectorError(f"a {self.kind or 'this'} cluster does not bind pods", reason="invalid")

    def close(self) -> None:
        """Release connections."""

    def list_nodes(self) -> ObjectList:
        return self.list("v1", "Node")

    def list_pods(self) -> ObjectList:
        return self.list("v1", "Pod")

    def list_workloads(self) -> list[dict[str, Any]]:
        """Every workload of the mirrored kinds, each with apiVersion and kind set."""
        workloads: list[dict[str, Any]] = []
        for api_version, kind in WORKLOAD_KINDS:
            for item in self.list(api_version, kind).items:
                workloads.append({**item, "apiVersion": api_version, "kind": kind})
        return workloads

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

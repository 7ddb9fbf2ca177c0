"""Pod and node builders mirroring kube-scheduler's ``pkg/scheduler/testing`` wrappers.

Ported test tables read like upstream's (``MakePod().Req(...).Node("node1")``) so a case can be
checked against its Go original line by line.  Quantities stay strings, as a manifest has them.
"""

from __future__ import annotations

import copy
from typing import Any

REQUIRED = "required"
PREFERRED = "preferred"


def make_pod() -> PodWrapper:
    return PodWrapper()


def make_node() -> NodeWrapper:
    return NodeWrapper()


def label_selector(key: str, operator: str, values: list[str] | None = None) -> dict[str, Any]:
    expr: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        expr["values"] = list(values)
    return {"matchExpressions": [expr]}


class PodWrapper:
    def __init__(self) -> None:
        self.pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "", "namespace": ""}, "spec": {"containers": []}}

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self.pod)

    @property
    def meta(self) -> dict[str, Any]:
        return self.pod["metadata"]

    @property
    def spec(self) -> dict[str, Any]:
        return self.pod["spec"]

    def name(self, name: str) -> PodWrapper:
        self.meta["name"] = name
        return self

    def namespace(self, ns: str) -> PodWrapper:
        self.meta["namespace"] = ns
        return self

    def node(self, name: str) -> PodWrapper:
        self.spec["nodeName"] = name
        return self

    def labels(self, labels: dict[str, str]) -> PodWrapper:
        self.meta.setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> PodWrapper:
        return self.labels({key: value})

    def annotation(self, key: str, value: str) -> PodWrapper:
        self.meta.setdefault("annotations", {})[key] = value
        return self

    def container(self, name: str) -> PodWrapper:
        self.spec["containers"].append({"name": name})
        return self

    def req(self, requests: dict[str, str]) -> PodWrapper:
        if requests:
            name = f"con{len(self.spec['containers'])}"
            self.spec["containers"].append({"name": name, "resources": {"requests": dict(requests), "limits": dict(requests)}})
        return self

    def init_req(self, requests: dict[str, str]) -> PodWrapper:
        inits = self.spec.setdefault("initContainers", [])
        inits.append({"name": f"init{len(inits)}", "resources": {"requests": dict(requests)}})
        return self

    def sidecar_req(self, requests: dict[str, str]) -> PodWrapper:
        inits = self.spec.setdefault("initContainers", [])
        inits.append({"name": f"sidecar{len(inits)}", "restartPolicy": "Always", "resources": {"requests": dict(requests)}})
        return self

    def overhead(self, overhead: dict[str, str]) -> PodWrapper:
        self.spec["overhead"] = dict(overhead)
        return self

    def pod_level_requests(self, requests: dict[str, str]) -> PodWrapper:
        self.spec["resources"] = {"requests": dict(requests)}
        return self

    def node_selector(self, selector: dict[str, str]) -> PodWrapper:
        self.spec["nodeSelector"] = dict(selector)
        return self

    def toleration(self, **toleration: str) -> PodWrapper:
        self.spec.setdefault("tolerations", []).append(dict(toleration))
        return self

    def affinity(self, affinity: dict[str, Any]) -> PodWrapper:
        self.spec["affinity"] = copy.deepcopy(affinity)
        return self

    def _pod_affinity(self, section: str, topology_key: str, selector: dict[str, Any], kind: str, weight: int = 1) -> PodWrapper:
        aff = self.spec.setdefault("affinity", {}).setdefault(section, {})
        term = {"labelSelector": selector, "topologyKey": topology_key}
        if kind == REQUIRED:
            aff.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        else:
            aff.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append({"weight": weight, "podAffinityTerm": term})
        return self

    def pod_affinity_in(self, key: str, topology_key: str, values: list[str], kind: str) -> PodWrapper:
        return self._pod_affinity("podAffinity", topology_key, label_selector(key, "In", values), kind)

    def pod_affinity_not_in(self, key: str, topology_key: str, values: list[str], kind: str) -> PodWrapper:
        return self._pod_affinity("podAffinity", topology_key, label_selector(key, "NotIn", values), kind)

    def pod_affinity_exists(self, key: str, topology_key: str, kind: str) -> PodWrapper:
        return self._pod_affinity("podAffinity", topology_key, label_selector(key, "Exists"), kind)

    def pod_anti_affinity_in(self, key: str, topology_key: str, values: list[str], kind: str) -> PodWrapper:
        return self._pod_affinity("podAntiAffinity", topology_key, label_selector(key, "In", values), kind)

    def pod_anti_affinity_not_in(self, key: str, topology_key: str, values: list[str], kind: str) -> PodWrapper:
        return self._pod_affinity("podAntiAffinity", topology_key, label_selector(key, "NotIn", values), kind)

    def pod_anti_affinity_exists(self, key: str, topology_key: str, kind: str) -> PodWrapper:
        return self._pod_affinity("podAntiAffinity", topology_key, label_selector(key, "Exists"), kind)


class NodeWrapper:
    def __init__(self) -> None:
        self.node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": ""}, "spec": {}, "status": {}}

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self.node)

    def name(self, name: str) -> NodeWrapper:
        self.node["metadata"]["name"] = name
        return self

    def label(self, key: str, value: str) -> NodeWrapper:
        self.node["metadata"].setdefault("labels", {})[key] = value
        return self

    def labels(self, labels: dict[str, str]) -> NodeWrapper:
        self.node["metadata"].setdefault("labels", {}).update(labels)
        return self

    def capacity(self, resources: dict[str, str]) -> NodeWrapper:
        """Like upstream's ``Capacity``: sets capacity and allocatable alike."""
        self.node["status"]["capacity"] = dict(resources)
        self.node["status"]["allocatable"] = dict(resources)
        return self

    def taints(self, taints: list[dict[str, str]]) -> NodeWrapper:
        self.node["spec"]["taints"] = [dict(t) for t in taints]
        return self

    def annotation(self, key: str, value: str) -> NodeWrapper:
        self.node["metadata"].setdefault("annotations", {})[key] = value
        return self


def node_with_labels(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    node = make_node().name(name)
    if labels:
        node.labels(labels)
    return node.obj()


def pod_on(node: str, labels: dict[str, str] | None = None, namespace: str = "", affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    """The bare ``&v1.Pod{Spec: {NodeName}, ObjectMeta: {Labels, Namespace}}`` upstream tables use."""
    pod = make_pod().namespace(namespace).node(node)
    if labels:
        pod.labels(labels)
    if affinity is not None:
        pod.affinity(affinity)
    return pod.obj()

"""A placement engine: kube-scheduler's scheduling cycle over a ``ClusterState`` that it updates.

``Scheduler.schedule(pod)`` runs one cycle the way kube-scheduler's ``schedulePod`` does:

1. PreFilter of every filter plugin (a rejection ends the cycle: "0/N nodes are available: <msg>.",
   a Skip drops the plugin for this pod, NodeAffinity's ``metadata.name`` terms narrow the nodes);
2. Filter, node by node starting where the previous cycle stopped, until
   ``numFeasibleNodesToFind`` nodes passed (``percentageOfNodesToScore``: 0 means upstream's
   adaptive ``max(5, 50 - n/125)`` percent, never fewer than 100 nodes); a node fails on the first
   plugin that rejects it, as ``RunFilterPlugins`` stops there;
3. PreScore/Score/NormalizeScore of every score plugin over the feasible nodes, summed with the
   plugin weights (a single feasible node is taken without scoring, as upstream does);
4. the highest total wins, then the pod is *assumed*: its requests, pod count and inter-pod
   affinity aggregates are added to the cluster state so the next pod sees them.

The per-node checks and scorers are the very closures the contract functions
(``framework.filter_nodes``/``score_nodes``) call, so verdicts and scores cannot drift; the engine
only adds the loop, the sampling, the weighted sum and the bookkeeping.  Caches for node
selectors and taints live on the cluster, keyed per pod shape, so replicas of one workload
evaluate them once per node.

Deliberate differences from kube-scheduler:

* ties: upstream picks uniformly at random among the best nodes; here the first of them in scan
  order wins.  The scan starts where the previous cycle stopped, so equal nodes still take turns,
  and a run is reproducible;
* node order is the order of the ``nodes`` given (upstream interleaves zones in its node tree);
* no preemption, no binding cycle, no nominated pods, no extenders; the failure message is
  ``FitError.Error()`` without the preemption suffix ("0/N nodes are available: 3 Insufficient
  cpu, 2 node(s) had untolerated taint {k: v}." with reasons counted and sorted as strings).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduling.cluster import ClusterState, NodeColumns, NodeInfo, PodInfo
from scheduling.framework import PLUGINS, make_plugin
from scheduling.plugins.base import Plugin
from scheduling.plugins.noderesources import fused_value
from scheduling.status import SKIP, UNRESOLVABLE, ArgsError, FieldError, FilterResult, Status, child, index

__all__ = [
    "DEFAULT_FILTERS",
    "DEFAULT_SCORES",
    "Placement",
    "PluginSpec",
    "Policy",
    "Scheduler",
    "Snapshot",
    "fit_error_message",
    "num_feasible_nodes_to_find",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODES = "no nodes available to schedule pods"


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """One enabled plugin: its registered name, score weight (0 means 1, as upstream) and args."""

    name: str
    weight: int = 1
    args: Mapping[str, Any] | None = None


# upstream's v1 default profile, restricted to the plugins implemented here, in upstream order
DEFAULT_FILTERS = (PluginSpec("TaintToleration"), PluginSpec("NodeAffinity"), PluginSpec("NodeResourcesFit"), PluginSpec("InterPodAffinity"))
DEFAULT_SCORES = (
    PluginSpec("TaintToleration", 3),
    PluginSpec("NodeAffinity", 2),
    PluginSpec("NodeResourcesFit", 1),
    PluginSpec("InterPodAffinity", 2),
    PluginSpec("NodeResourcesBalancedAllocation", 1),
)


def _check_specs(specs: Sequence[PluginSpec], path: str, point: str) -> list[FieldError | str]:
    errors: list[FieldError | str] = []
    for i, spec in enumerate(specs):
        p = index(path, i)
        cls = PLUGINS.get(spec.name)
        if cls is None:
            errors.append(FieldError.not_supported(child(p, "name"), spec.name, sorted(PLUGINS)))
            continue
        if not (cls.has_filter if point == "filter" else cls.has_score):
            errors.append(FieldError.invalid(child(p, "name"), spec.name, f"plugin has no {point} extension point"))
        if isinstance(spec.weight, bool) or not isinstance(spec.weight, int) or spec.weight < 0:
            errors.append(FieldError.invalid(child(p, "weight"), spec.weight, "must be a non-negative integer"))
        try:
            cls(spec.args)
        except ArgsError as exc:
            errors += [f"{child(p, 'args')}.{m}" for m in exc.messages]
        except ValueError as exc:
            errors.append(f"{child(p, 'args')}: {exc}")
    return errors


@dataclass(frozen=True)
class Policy:
    """Which plugins filter and score, with weights and args (a KubeSchedulerConfiguration profile).

    Construct directly, use ``Policy.default()`` (upstream's defaults restricted to the plugins
    here), or ``Policy.from_config(dict)`` for the configuration-file shape.  Invalid policies raise
    ``ArgsError`` (a ``ValueError``) naming the field.
    """

    filters: tuple[PluginSpec, ...] = DEFAULT_FILTERS
    scores: tuple[PluginSpec, ...] = DEFAULT_SCORES
    percentage_of_nodes_to_score: int = 0
    name: str = "default-scheduler"

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple(self.filters))
        object.__setattr__(self, "scores", tuple(self.scores))
        errors = _check_specs(self.filters, "filters", "filter") + _check_specs(self.scores, "scores", "score")
        pct = self.percentage_of_nodes_to_score
        if isinstance(pct, bool) or not isinstance(pct, int) or not 0 <= pct <= 100:
            errors.append(FieldError.invalid("percentageOfNodesToScore", pct, "not in valid range [0, 100]"))
        if errors:
            raise ArgsError(errors)

    @classmethod
    def default(cls) -> Policy:
        return cls()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Policy:
        """A profile in KubeSchedulerConfiguration casing::

            {"schedulerName": "stack", "percentageOfNodesToScore": 0,
             "plugins": {"filter": {"enabled": [...], "disabled": [{"name": "*"}]},
                         "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 2}]}},
             "pluginConfig": [{"name": "NodeResourcesFit", "args": {...}}]}

        Enabled/disabled lists merge with the defaults as upstream's ``mergePluginSet`` does
        (a re-enabled default keeps its place with the new weight, ``"*"`` disables every default).
        """
        if not isinstance(config, Mapping):
            raise ArgsError([FieldError.invalid("", type(config).__name__, "policy config must be an object")])
        errors: list[FieldError | str] = []
        unknown = [k for k in config if k not in ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")]
        errors += [f'unknown field "{k}"' for k in unknown]
        args_by_name = _plugin_config(config.get("pluginConfig"), errors)
        plugins = config.get("plugins") or {}
        if not isinstance(plugins, Mapping):
            errors.append(FieldError.invalid("plugins", type(plugins).__name__, "must be an object"))
            plugins = {}
        errors += [f'unknown field "plugins.{k}"' for k in plugins if k not in ("filter", "score")]
        filters = _merge(DEFAULT_FILTERS, plugins.get("filter"), "plugins.filter", errors, args_by_name)
        scores = _merge(DEFAULT_SCORES, plugins.get("score"), "plugins.score", errors, args_by_name)
        pct = config.get("percentageOfNodesToScore", 0)
        name = config.get("schedulerName", "default-scheduler")
        if not isinstance(name, str):
            errors.append(FieldError.invalid("schedulerName", name, "must be a string"))
        if errors:
            raise ArgsError(errors)
        try:
            return cls(filters, scores, pct, name)
        except ArgsError as exc:
            raise ArgsError([_config_path(m) for m in exc.messages]) from None


def _config_path(message: str) -> str:
    """Map a ``filters[i]``/``scores[i]`` error of the built policy to the config's field name."""
    for prefix, point in (("filters[", "plugins.filter.enabled["), ("scores[", "plugins.score.enabled[")):
        if message.startswith(prefix):
            return point + message[len(prefix) :]
    return message


def _plugin_config(raw: Any, errors: list[FieldError | str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if raw is None:
        return out
    if not isinstance(raw, list):
        errors.append(FieldError.invalid("pluginConfig", type(raw).__name__, "must be a list"))
        return out
    for i, item in enumerate(raw):
        p = index("pluginConfig", i)
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            errors.append(FieldError.required(child(p, "name"), "each plugin config needs a name"))
            continue
        if item["name"] in out:
            errors.append(FieldError.duplicate(child(p, "name"), item["name"]))
        elif item["name"] not in PLUGINS:
            errors.append(FieldError.not_supported(child(p, "name"), item["name"], sorted(PLUGINS)))
        else:
            out[item["name"]] = item.get("args")
            try:
                PLUGINS[item["name"]](item.get("args"))
            except ArgsError as exc:
                errors += [f"{child(p, 'args')}.{m}" for m in exc.messages]
            except ValueError as exc:
                errors.append(f"{child(p, 'args')}: {exc}")
    return out


def _merge(
    defaults: Sequence[PluginSpec], raw: Any, path: str, errors: list[FieldError | str], args: Mapping[str, Any]
) -> tuple[PluginSpec, ...]:
    """``mergePluginSet``: defaults minus disabled, re-enabled defaults replaced in place, then the rest."""
    if raw is None:
        return tuple(PluginSpec(d.name, d.weight, args.get(d.name)) for d in defaults)
    if not isinstance(raw, Mapping):
        errors.append(FieldError.invalid(path, type(raw).__name__, "must be an object"))
        return ()
    errors += [f'unknown field "{path}.{k}"' for k in raw if k not in ("enabled", "disabled")]
    disabled = {str(d.get("name")) for d in raw.get("disabled") or [] if isinstance(d, Mapping)}
    enabled: list[PluginSpec] = []
    for i, item in enumerate(raw.get("enabled") or []):
        p = index(child(path, "enabled"), i)
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            errors.append(FieldError.required(child(p, "name"), "each enabled plugin needs a name"))
            continue
        weight = item.get("weight", 0)
        enabled.append(PluginSpec(item["name"], weight if weight != 0 else 1, args.get(item["name"])))
    by_name = {spec.name: spec for spec in enabled}
    merged: list[PluginSpec] = []
    replaced: set[str] = set()
    if "*" not in disabled:
        for default in defaults:
            if default.name in disabled:
                continue
            custom = by_name.get(default.name)
            if custom is not None:
                merged.append(custom)
                replaced.add(custom.name)
            else:
                merged.append(PluginSpec(default.name, default.weight, args.get(default.name)))
    merged += [spec for spec in enabled if spec.name not in replaced]
    return tuple(merged)


# ------------------------------------------------------------------------ cycle helpers


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """``numFeasibleNodesToFind``: how many feasible nodes to look for before scoring."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = num_all_nodes * percentage // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


def _node_name(pod: Mapping[str, Any]) -> Any:
    return (pod.get("spec") or {}).get("nodeName")


def fit_error_message(num_all_nodes: int, statuses: Iterable[Status], absent: Status | None = None, absent_count: int = 0) -> str:
    """``FitError.Error()``: reasons counted over the rejected nodes, "<n> <reason>" sorted as strings."""
    counts: dict[str, int] = {}
    for status in statuses:
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    if absent is not None and absent_count > 0:
        for reason in absent.reasons:
            counts[reason] = counts.get(reason, 0) + absent_count
    message = f"0/{num_all_nodes} nodes are available:"
    parts = sorted(f"{count} {reason}" for reason, count in counts.items())
    if parts:
        message += f" {', '.join(parts)}."
    return message


@dataclass(frozen=True, slots=True)
class Placement:
    """The outcome of one cycle: ``node`` (None when unschedulable), its total ``score``, the
    kube-scheduler-style ``reasons`` message when unschedulable, and how much work was done."""

    node: str | None
    score: int | None = None
    reasons: str = ""
    feasible: int = 0
    evaluated: int = 0


@dataclass(frozen=True)
class Snapshot:
    """Nodes, the pods already placed and the namespaces: the input of a run, never mutated."""

    nodes: Sequence[Mapping[str, Any]]
    pods: Sequence[Mapping[str, Any]] = ()
    namespaces: Sequence[Mapping[str, Any]] = ()


@dataclass
class Explanation:
    """Every node's filter verdict and the feasible nodes' scores, without sampling or assuming."""

    filters: dict[str, FilterResult] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)
    plugin_scores: dict[str, dict[str, int]] = field(default_factory=dict)


# ------------------------------------------------------------------------ the scheduler


@dataclass(frozen=True, slots=True)
class _StaticPass:
    """Node positions passing the leading static filters, and the first failure of the others."""

    positions: list[int]
    failures: dict[int, Status]


_UNKNOWN, _INFEASIBLE = -2, -1  # a node-local score is >= 0
#: Unknown values in a scan window from which one array computation beats a call per node.
_VECTOR_FROM = 24
#: How far past a window one array computation of a scan also resolves unknown positions.
_VECTOR_CHUNK = 512


@dataclass(frozen=True, slots=True)
class _LocalPlan:
    """A pod shape's node-local cycle: its kept values, per-node value function, candidates,
    the score every node gets from constant scorers, and how many feasible nodes to find."""

    memo: _LocalMemo
    value: Any
    nodes: list[NodeInfo]
    constant: int
    want: int
    vector: Any = None  # ``value`` over many nodes at once (``noderesources.fused_value``), or None


class _LocalMemo:
    """One pod shape's node-local verdicts and scores over one static pre-pass's positions:
    ``scores[k]`` (a numpy array) for node ``passing.positions[k]`` is its weighted score sum,
    ``_INFEASIBLE`` when a check refuses it, ``_UNKNOWN`` until a scan reaches it or after a pod
    went there. Arrays, because a fleet has hundreds of pod shapes: a shape's memo comes back
    after hundreds of placements elsewhere, and forgetting those nodes, finding a window's
    unknown values and its best are then a few array operations, not loops over the window."""

    __slots__ = ("epoch", "index", "scores", "seen")

    def __init__(self, index: _PassIndex, cluster: ClusterState) -> None:
        import numpy as np

        self.index = index
        self.scores = np.full(len(index.at), _UNKNOWN, dtype=np.int64)
        self.seen = len(cluster.changes)
        self.epoch = cluster.change_epoch

    def forget(self, cluster: ClusterState, vector: Any, columns: NodeColumns | None, ahead: tuple[int, int]) -> None:
        """Drop what it knew of the nodes pods went to since it last looked. With ``vector``
        (``_LocalPlan.vector``) and many such nodes, score again at once the unknown positions
        among the ``ahead`` ones (first, count; wrapping), which the shape's next replicas are
        to scan: a shape comes back after thousands of placements elsewhere, scattered over
        every window those replicas scan, and one array call costs less than one per window.
        Positions further on are left unknown: they are scored if a scan reaches them."""
        count = len(cluster.changes)
        if count == self.seen:
            return
        if count == self.seen + 1:  # the last replica's node, as replicas are placed: no arrays
            self.seen = count
            node, where = cluster.changes[-1], self.index.where
            if node < len(where) and (k := where[node]) >= 0:
                self.scores[k] = _UNKNOWN
            return
        nodes = cluster.changed_since(self.seen)
        self.seen = len(cluster.changes)
        where = self.index.where
        ks = where[nodes[nodes < len(where)]]
        ks = ks[ks >= 0]
        self.scores[ks] = _UNKNOWN
        if vector is not None and len(ks) >= _VECTOR_FROM:
            self._score_unknown(vector, columns, *ahead)

    def _score_unknown(self, vector: Any, columns: NodeColumns | None, first: int, count: int) -> None:
        import numpy as np

        scores = self.scores
        size = len(scores)
        count = min(count, size)
        spans = [(first, min(size, first + count))] + ([(0, first + count - size)] if first + count > size else [])
        unknown = np.concatenate([lo + (scores[lo:hi] == _UNKNOWN).nonzero()[0] for lo, hi in spans])
        if len(unknown):
            scores[unknown] = vector(columns, self.index.at[unknown])


@dataclass(frozen=True, slots=True)
class _PassIndex:
    """A static pre-pass's positions as arrays, shared by every pod shape's memo over it:
    ``at[k]`` is ``passing.positions[k]``, ``where[node index]`` is ``k`` (-1: not passing)."""

    passing: _StaticPass
    at: Any
    where: Any

    @classmethod
    def of(cls, passing: _StaticPass) -> _PassIndex:
        import numpy as np

        at = np.array(passing.positions, dtype=np.intp)
        where = np.full(int(at.max()) + 1 if len(at) else 0, -1, dtype=np.intp)
        where[at] = np.arange(len(at), dtype=np.intp)
        return cls(passing, at, where)


@dataclass(frozen=True, slots=True)
class _Filters:
    """One pod's filter phase: dynamic checks, static pre-pass, candidates, PreFilterResult leftovers."""

    checks: list[Any]
    static: _StaticPass | None
    nodes: list[NodeInfo]
    absent: Status | None
    absent_count: int


class Scheduler:
    """Places pods one by one on a snapshot under a policy, assuming each placement."""

    static_prepass = True  # tests turn it off to check it changes nothing but speed
    local_cycle = True  # likewise (``_local_plan``)
    plan_cache = True  # likewise (``_outcome``)
    vectorise = True  # likewise (``_LocalPlan.vector``)

    def __init__(self, policy: Policy, nodes: Sequence[Mapping[str, Any]] = (), pods: Iterable[Mapping[str, Any]] = (),
                 namespaces: Iterable[Mapping[str, Any]] = (), *, cluster: ClusterState | None = None) -> None:
        self.policy = policy
        self.cluster = cluster if cluster is not None else ClusterState.build(nodes, pods, namespaces)
        self.filters: list[Plugin] = [make_plugin(s.name, s.args) for s in policy.filters]
        self.scorers: list[tuple[Plugin, int]] = [(make_plugin(s.name, s.args), s.weight or 1) for s in policy.scores]
        self.next_start = 0
        self._static_cache: dict[tuple[Any, ...], _StaticPass] = {}
        self._local_memo: dict[tuple[Any, ...], _LocalMemo] = {}
        self._pass_index: dict[int, _PassIndex] = {}
        self._plans: dict[object, dict[tuple[str, int], Any]] = {}  # PodInfo.shape -> pod-only outcomes

    @classmethod
    def from_snapshot(cls, policy: Policy, snapshot: Snapshot) -> Scheduler:
        return cls(policy, snapshot.nodes, snapshot.pods, snapshot.namespaces)

    @classmethod
    def over(cls, policy: Policy, cluster: ClusterState) -> Scheduler:
        """A scheduler for ``policy`` over a state other schedulers (other policies) share: each
        sees the others' placements, as one kube-scheduler's profiles share one cache. The caller
        carries ``next_start`` from one to the next when it wants one scan order for all."""
        return cls(policy, cluster=cluster)

    # -- one cycle ------------------------------------------------------------------------------

    def schedule(self, pod: Mapping[str, Any] | PodInfo) -> Placement:
        """Filter, score, pick the best node and assume the pod there. A PodInfo may be passed
        (``PodInfo.sibling`` of an earlier replica) so replicas share their derived values."""
        info = pod if isinstance(pod, PodInfo) else PodInfo(pod)
        placement = self._cycle(info)
        if placement.node is not None:
            self._assume(info, placement.node)
        return placement

    def decide(self, pod: Mapping[str, Any] | PodInfo) -> Placement:
        """``schedule`` without the assume: where the pod would go now (the caller assumes it,
        ``assume``, once it commits to the placement)."""
        return self._cycle(pod if isinstance(pod, PodInfo) else PodInfo(pod))

    def _prefilter(self, info: PodInfo) -> _Filters | str:
        """PreFilter of every filter plugin: the checks to run, the candidate nodes and the status
        (and count) of nodes a PreFilterResult left out; or PreFilter's rejection message.

        Checks of the leading *static* plugins (TaintToleration and NodeAffinity in the default
        order) are folded into one per-pod-shape list of passing node positions, evaluated once
        and cached; the first failing plugin per node, and so every reason, stays as upstream's.
        """
        nodes = self.cluster.nodes
        static: list[Any] = []
        static_key: list[Any] = []
        dynamic: list[Any] = []
        names: set[str] | None = None
        narrowing: list[str] = []
        for plugin in self.filters:
            outcome = self._outcome("prefilter", plugin, info)
            if outcome is SKIP:
                continue
            if isinstance(outcome, Status):
                return f"0/{len(nodes)} nodes are available: {', '.join(outcome.reasons)}."
            if plugin.static_filter and not dynamic and self.static_prepass:
                static.append(outcome)
                static_key.append((id(plugin), self._outcome("filter_signature", plugin, info)))
            else:
                dynamic.append(outcome)
            allowed = self._outcome("node_names", plugin, info)
            if allowed is not None:
                names = allowed if names is None else names & allowed
                narrowing.append(plugin.name)
        if names is not None:
            candidates = [n for n in nodes if n.name in names]
            absent = Status.of(UNRESOLVABLE, f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]")
            return _Filters(static + dynamic, None, candidates, absent, len(nodes) - len(candidates))
        passing = self._static_pass(tuple(static_key), static, nodes) if static else None
        return _Filters(dynamic, passing, nodes, None, 0)

    def _outcome(self, method: str, plugin: Plugin, info: PodInfo) -> Any:
        """``plugin.<method>`` for the pod: for a pod-only plugin (``Plugin.pod_only``) and a pod
        with siblings, computed once per pod shape and kept, as replicas of one template share
        it; otherwise computed now. An exception is raised again for every replica (not kept)."""
        shape = info.shape
        if shape is None or not plugin.pod_only or not self.plan_cache:
            return _call(method, plugin, self.cluster, info)
        plan = self._plans.get(shape)
        if plan is None:
            plan = self._plans[shape] = {}
        key = (method, id(plugin))
        found = plan.get(key, _MISSING)
        if found is _MISSING:
            found = plan[key] = _call(method, plugin, self.cluster, info)
        return found

    def _static_pass(self, key: tuple[Any, ...], checks: list[Any], nodes: list[NodeInfo]) -> _StaticPass:
        found = self._static_cache.get(key)
        if found is None:
            positions: list[int] = []
            failures: dict[int, Status] = {}
            for pos, node in enumerate(nodes):
                for check in checks:
                    status = check(node)
                    if status is not None:
                        failures[pos] = status
                        break
                else:
                    positions.append(pos)
            found = self._static_cache[key] = _StaticPass(positions, failures)
        return found

    def schedule_replicas(self, pods: Sequence[Mapping[str, Any]]) -> list[Placement]:
        """Place replicas of one template in order, each assumed before the next: the same
        placements as ``schedule`` called for each in turn (the replicas must be what
        ``PodInfo.sibling`` requires: equal but for name and ``nodeName``).

        A replica that finds no node binds and rotates nothing, so the next ones (with the same
        ``nodeName``) get the same answer without a cycle: a full cluster refused every further
        replica of a template with a scan of all its nodes each.

        While every plugin's outcomes survive the shape's own placements
        (``Plugin.survives_placement``) and the node-local cycle applies, the plan of the first
        replica is kept, and each next one costs a scan of the sampling window and an assume.
        """
        placements: list[Placement] = []
        first: PodInfo | None = None
        plan: _LocalPlan | None = None
        refused: tuple[Placement, Any] | None = None  # a replica that found no node, and its nodeName
        for i, pod in enumerate(pods):
            if refused is not None and refused[1] == _node_name(pod):
                placements.append(refused[0])  # nothing changed since (a refusal binds nothing, rotates nothing)
                continue
            info = PodInfo(pod) if first is None else first.sibling(pod)
            if first is None:
                first = info
                first.shape = object()  # replicas share their plugin outcomes (``_outcome``)
            placement = self._local_scan(plan, len(pods) - i) if plan is not None else None
            if placement is None:
                placement, plan = self._planned_cycle(info, len(pods) - i)
                if plan is not None and not self._plan_survives(info):
                    plan = None
            if placement.node is not None:
                self._assume(info, placement.node, owned=info is not first)  # the first lends its values to the next
            else:
                refused = (placement, _node_name(pod))
            placements.append(placement)
        return placements

    def _plan_survives(self, info: PodInfo) -> bool:
        return all(plugin.survives_placement(info) for plugin in self.filters) and all(
            plugin.survives_placement(info) for plugin, _ in self.scorers)

    def _cycle(self, info: PodInfo) -> Placement:
        return self._planned_cycle(info)[0]

    def _planned_cycle(self, info: PodInfo, replicas: int = 1) -> tuple[Placement, _LocalPlan | None]:
        """One cycle, and the node-local plan it placed the pod with (None when it took the full
        path); ``replicas``: the pods of its shape left to place, this one included."""
        all_nodes = self.cluster.nodes
        if not all_nodes:
            return Placement(None, reasons=NO_NODES), None
        pre = self._prefilter(info)
        if isinstance(pre, str):
            return Placement(None, reasons=pre), None
        plan = self._local_plan(info, pre)
        local = self._local_scan(plan, replicas) if plan is not None else None
        if local is not None:
            return local, plan
        return self._full_cycle(pre, info), None

    def _full_cycle(self, pre: _Filters, info: PodInfo) -> Placement:
        all_nodes = self.cluster.nodes
        feasible, rejected, processed = self._find_feasible(pre)
        if not feasible:
            message = fit_error_message(len(all_nodes), rejected, pre.absent, pre.absent_count)
            return Placement(None, reasons=message, evaluated=processed)
        if len(feasible) == 1:
            return Placement(feasible[0].name, 0, feasible=1, evaluated=processed)
        totals = self._score(info, feasible)
        best = 0
        for i in range(1, len(totals)):
            if totals[i] > totals[best]:
                best = i
        return Placement(feasible[best].name, totals[best], feasible=len(feasible), evaluated=processed)

    def _local_plan(self, info: PodInfo, pre: _Filters) -> _LocalPlan | None:
        """The node-local cycle's plan for this pod, or None when the pod does not qualify: it
        does when every remaining check and score is node-local (``plugins.base.node_local``)
        or the same for every node. Verdicts and scores are then kept per pod shape
        (``PodInfo.resource_key``) and node (``_LocalMemo``), computed when a scan first reaches
        a node and again after a pod went there. Replicas of one template, placed one after
        another, then cost a few list operations over the window instead of every plugin on
        every candidate. ``_local_scan`` keeps the scan order, sampling, rotation and first-best
        tie-break of ``_find_feasible`` + ``_score``, and gives None when nothing fits (the
        full path then gives the reasons)."""
        passing = pre.static
        if not self.local_cycle or passing is None or pre.absent is not None or not all(getattr(c, "node_local", False) for c in pre.checks):
            return None
        if info.has_pod_affinity or _has_preferred_node_affinity(info):
            return None
        local: list[tuple[Any, int]] = []
        constant = 0
        for plugin, weight in self.scorers:
            try:
                scorer = self._outcome("prescore", plugin, info)
            except ValueError:
                return None  # the full path raises it, if it gets as far as scoring
            if scorer is SKIP:
                continue
            if hasattr(scorer, "constant"):
                constant += weight * scorer.constant  # type: ignore[union-attr]
            elif getattr(scorer, "node_local", False):
                local.append((getattr(scorer, "one", None) or (lambda node, scorer=scorer: scorer((node,))[0]), weight))
            else:
                return None
        nodes, checks = pre.nodes, pre.checks
        memo = self._local_memo.get((info.resource_key, id(passing)))
        if memo is None or memo.index.passing is not passing or memo.epoch != self.cluster.change_epoch:
            index = self._pass_index.get(id(passing))
            if index is None or index.passing is not passing:
                index = self._pass_index[id(passing)] = _PassIndex.of(passing)
            memo = self._local_memo[(info.resource_key, id(passing))] = _LocalMemo(index, self.cluster)

        fused = fused_value(checks[0], local, _INFEASIBLE) if len(checks) == 1 and len(local) == 2 else None
        if fused is not None:  # the default policy's shape, inlined
            value = fused
        elif len(checks) == 1 and len(local) == 2:  # two scores, without the loops
            (check,), ((one_a, weight_a), (one_b, weight_b)) = checks, local

            def value(node: NodeInfo) -> int:
                return _INFEASIBLE if check(node) is not None else weight_a * one_a(node) + weight_b * one_b(node)
        else:
            def value(node: NodeInfo) -> int:
                for check in checks:
                    if check(node) is not None:
                        return _INFEASIBLE
                total = 0
                for one, weight in local:
                    total += weight * one(node)
                return total

        want = num_feasible_nodes_to_find(self.policy.percentage_of_nodes_to_score, len(nodes))
        vector = getattr(value, "vector", None) if self.vectorise and nodes is self.cluster.nodes else None
        return _LocalPlan(memo, value, nodes, constant, want, vector)

    def _local_scan(self, plan: _LocalPlan, replicas: int = 1) -> Placement | None:
        """One pod's filter and score over the plan's kept values (see ``_local_plan``); the
        ``replicas`` left to place (this one included) scan about ``want`` positions each."""
        import numpy as np

        memo, value, nodes, want = plan.memo, plan.value, plan.nodes, plan.want
        columns = self.cluster.columns() if plan.vector is not None else None  # None once a quantity outgrew them
        vector = plan.vector if columns is not None else None
        positions = memo.index.passing.positions
        n = len(nodes)
        start = self.next_start % n
        at = bisect_left(positions, start)
        memo.forget(self.cluster, vector, columns, (at, replicas * want + _VECTOR_CHUNK))
        scores, at_all = memo.scores, memo.index.at

        def resolve(lo: int, window: Any) -> None:
            unknown = (window == _UNKNOWN).nonzero()[0]
            if vector is not None and len(unknown) >= _VECTOR_FROM:
                # The same values as ``value``'s, for the window's unknown positions and those
                # after it up to ``_VECTOR_CHUNK``: over a few hundred nodes an array call's cost
                # is mostly its fixed part, and the next replicas' windows follow this one.
                ahead = min(lo + _VECTOR_CHUNK, len(scores)) - (lo + len(window))
                if ahead > 0:
                    after = scores[lo + len(window) : lo + len(window) + ahead]
                    unknown = np.concatenate((unknown, len(window) + (after == _UNKNOWN).nonzero()[0]))
                scores[lo + unknown] = vector(columns, at_all[lo + unknown])
            else:
                for k in unknown.tolist():
                    window[k] = value(nodes[positions[lo + k]])

        found, best_score, best, last = 0, -1, -1, -1
        for lo, hi in ((at, len(positions)), (0, at)):
            k = lo
            while k < hi and found < want:
                end = min(hi, k + want - found)
                window = scores[k:end]  # a view: resolving writes into the memo
                resolve(k, window)
                feasible = int(np.count_nonzero(window >= 0))
                if feasible:
                    i = int(window.argmax())  # the first best, as the per-node scan's tie-break
                    if window[i] > best_score:
                        best_score, best = int(window[i]), positions[k + i]
                    found += feasible
                    if found == want:  # the window held only feasible nodes: its last is the want-th
                        last = positions[end - 1]
                k = end
            if found == want:
                break
        if found == 0:
            return None
        processed = n if last < 0 else (last - start if last >= start else last + n - start) + 1
        self.next_start = (start + processed) % n
        score = 0 if found == 1 else best_score + plan.constant
        return Placement(nodes[best].name, score, feasible=found, evaluated=processed)

    def _find_feasible(self, pre: _Filters) -> tuple[list[NodeInfo], list[Status], int]:
        """``findNodesThatPassFilters``: scan from ``next_start`` until enough nodes passed.

        Returns the feasible nodes in scan order, the statuses of rejected nodes (complete when
        none passed, which is when the message needs them) and how many nodes were processed.
        """
        nodes, checks, passing = pre.nodes, pre.checks, pre.static
        n = len(nodes)
        if n == 0:
            return [], [], 0
        want = num_feasible_nodes_to_find(self.policy.percentage_of_nodes_to_score, n)
        start = self.next_start % n
        if not checks and passing is None:
            return [nodes[(start + i) % n] for i in range(want)], [], 0
        if passing is None:
            positions: Sequence[int] = range(start, start + n)
        else:
            at = bisect_left(passing.positions, start)
            positions = passing.positions[at:] + [p + n for p in passing.positions[:at]]
        feasible: list[NodeInfo] = []
        rejected: list[Status] = []
        last = -1
        for pos in positions:
            node = nodes[pos % n] if pos >= n else nodes[pos]
            for check in checks:
                status = check(node)
                if status is not None:
                    rejected.append(status)
                    break
            else:
                feasible.append(node)
                if len(feasible) == want:
                    last = pos
                    break
        if last < 0:
            processed = n
            if passing is not None:
                rejected.extend(passing.failures.values())
        else:
            processed = last - start + 1
        self.next_start = (start + processed) % n
        return feasible, rejected, processed

    def _score(self, info: PodInfo, feasible: list[NodeInfo]) -> list[int]:
        totals = [0] * len(feasible)
        for plugin, weight in self.scorers:
            scorer = self._outcome("prescore", plugin, info)
            if scorer is SKIP:
                continue
            scores = scorer(feasible)  # type: ignore[operator]
            totals = [t + s for t, s in zip(totals, scores, strict=True)] if weight == 1 else [t + weight * s for t, s in zip(totals, scores, strict=True)]
        return totals

    def _assume(self, info: PodInfo, node_name: str, *, owned: bool = False) -> PodInfo:
        """Bind the pod to the node in the snapshot. An ``owned`` PodInfo (one the engine made,
        which nobody else holds) is bound in place instead of through a bound sibling."""
        pod = dict(info.pod)
        pod["spec"] = {**(info.pod.get("spec") or {}), "nodeName": node_name}
        if owned:
            assumed = info
            assumed.pod, assumed.node_name = pod, node_name
        else:
            assumed = info.sibling(pod)
        assumed.assumed = True
        node = self.cluster.by_name[node_name]
        self.cluster.add_pod(assumed, node)
        self.cluster.changes.append(node.index)
        return assumed

    def assume(self, pod: Mapping[str, Any] | PodInfo, node_name: str) -> PodInfo:
        """Record a placement decided elsewhere (e.g. a bind the engine did not choose); the
        PodInfo now counted on the node (``ClusterState.remove_pod`` takes it back)."""
        if node_name not in self.cluster.by_name:
            raise ValueError(f"unknown node {node_name!r}")
        info = pod if isinstance(pod, PodInfo) else PodInfo(pod)
        return self._assume(info, node_name)

    # -- diagnostics ----------------------------------------------------------------------------

    def explain(self, pod: Mapping[str, Any]) -> Explanation:
        """All nodes' verdicts (first rejecting plugin in policy order) and the feasible nodes'
        weighted scores, with no sampling and no assume: what tests and the simulator UI read."""
        info = PodInfo(pod)
        result = Explanation()
        checks: list[Any] = []
        for plugin in self.filters:
            outcome = plugin.prefilter(self.cluster, info)
            if outcome is SKIP:
                continue
            if isinstance(outcome, Status):
                rejected = FilterResult.from_status(outcome)
                result.filters = {n.name: rejected for n in self.cluster.nodes}
                return result
            checks.append(outcome)
        feasible = []
        for node in self.cluster.nodes:
            verdict = next((s for s in (c(node) for c in checks) if s is not None), None)
            result.filters[node.name] = FilterResult.from_status(verdict)
            if verdict is None:
                feasible.append(node)
        totals = [0] * len(feasible)
        for plugin, weight in self.scorers:
            scorer = plugin.prescore(self.cluster, info)
            scores = [0] * len(feasible) if scorer is SKIP else scorer(feasible)  # type: ignore[operator]
            result.plugin_scores[plugin.name] = {n.name: s for n, s in zip(feasible, scores, strict=True)}
            for i, s in enumerate(scores):
                totals[i] += weight * s
        result.scores = {n.name: t for n, t in zip(feasible, totals, strict=True)}
        return result

    def requested(self, node_name: str) -> dict[str, int]:
        """The node's summed requests now (cpu in millicores), assumed pods included."""
        node = self.cluster.by_name[node_name]
        out = {"cpu": node.req_cpu, "memory": node.req_mem, "pods": len(node.pods)}
        if node.req_eph:
            out["ephemeral-storage"] = node.req_eph
        out.update(node.req_scalars)
        return out


_MISSING = object()


def _call(method: str, plugin: Plugin, cluster: ClusterState, info: PodInfo) -> Any:
    if method in ("prefilter", "prescore"):
        return getattr(plugin, method)(cluster, info)
    return getattr(plugin, method)(info)


def _has_preferred_node_affinity(info: PodInfo) -> bool:
    spec = info.pod.get("spec") or {}
    affinity = spec.get("affinity") if isinstance(spec, Mapping) else None
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    return isinstance(node_affinity, Mapping) and node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") is not None


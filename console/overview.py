"""What needs attention on the overview: rollouts in flight, quota groups near their limit,
degraded federated workloads, clusters not ready, active downgrades.

Each is one count and one short list, read with a fixed number of SQL statements whatever the
fleet's size (200k nodes, 500 clusters, 5,000 quota groups): counts are SQL aggregates, lists
are ``LIMIT``-ed, nothing loops over nodes. A section is there only for those who may read
what it shows (``core.permissions``: by role, or on some objects through a scoped role); the
counts and lists go through ``restrict``, so a scoped operator's attention is their scope's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.permissions import may, may_any_or_role, restrict
from federation.models import FederatedObject
from fleet.models import Cluster
from nodeconfig import rollout
from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.filtersets import node_state_q
from quotas.models import QuotaGroup

#: Rows shown per section; the section's link leads to the whole list.
SHOWN = 8
#: Failed nodes named under each active downgrade (the target's page lists them all).
FAILURES_SHOWN = 5
#: A quota group whose fullest resource is at least this used/hard is "near its limit".
NEAR_LIMIT = 0.9

ROLLING_STATES = (ConfigTarget.RolloutState.PROGRESSING, ConfigTarget.RolloutState.PAUSED, ConfigTarget.RolloutState.FAILED)
DEGRADED_PHASES = (FederatedObject.Phase.DEGRADED, FederatedObject.Phase.UNSCHEDULABLE)


@dataclass
class Item:
    """One row of a section: what it is, where its detail is, and a short state."""

    name: str
    url: str
    state: str = ""
    hot: bool = False
    progress: dict[str, int] | None = None
    failures: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Section:
    """A count with the first few rows and a link to the full list."""

    key: str
    title: Any
    count: int
    more_url: str
    items: list[Item] = field(default_factory=list)
    empty: Any = ""

    @property
    def hidden(self) -> int:
        return max(self.count - len(self.items), 0)


def attention(user: Any) -> list[Section]:
    """Every section this user may read, in the order an on-call reads them."""
    sections = []
    if may_any_or_role(user, "view", Cluster):
        sections.append(clusters_not_ready(restrict(Cluster.objects.all(), user)))
    if may_any_or_role(user, "view", ConfigTarget):
        sections.append(active_downgrades(restrict(ConfigTarget.objects.all(), user)))
    rollouts = rollouts_in_flight(user)
    if rollouts is not None:
        sections.append(rollouts)
    if may_any_or_role(user, "view", FederatedObject):
        sections.append(degraded_workloads(restrict(FederatedObject.objects.all(), user)))
    groups = restrict(QuotaGroup.objects.all(), user)
    if may(user, "view", QuotaGroup) or groups.exists():
        sections.append(quota_groups_near_limit(groups))
    return sections


def clusters_not_ready(clusters: QuerySet) -> Section:
    rows = clusters.filter(ready=False).order_by("name")
    items = [Item(name, reverse("fleet:cluster-detail", args=[name]), _short(message) or _("not ready"), hot=True)
             for name, message in rows.values_list("name", "status_message")[:SHOWN]]
    return Section("clusters", gettext_lazy("Clusters not ready"), rows.count(), reverse("fleet:index"), items,
                   gettext_lazy("Every cluster is ready."))


def active_downgrades(targets: QuerySet) -> Section:
    """Each active downgrade with its acknowledgements and its first failed nodes (name, agent
    error): the on-call reads who failed and why without leaving the overview. A few grouped
    queries plus one bounded query per shown downgrade (there are a handful during an incident)."""
    rows = targets.filter(emergency=True, deleted=False).select_related("cluster", "config_type").order_by("-created")
    shown = list(rows[:SHOWN])
    progress = rollout.progress_many(shown)
    items = []
    for t in shown:
        failed = (NodeConfig.objects.filter(target=t).filter(node_state_q(t, "failed"))
                  .select_related("node", "cluster").order_by("node__name")[:FAILURES_SHOWN])
        items.append(Item(t.name, reverse("nodeconfig:target-detail", args=[t.pk]),
                          _("cluster %(name)s") % {"name": t.cluster.name} if t.cluster else _("whole fleet"), hot=True,
                          progress=progress.get(t.pk),
                          failures=[(row.node.name, reverse("nodeconfig:node-config", args=[row.cluster.name, row.node.name]),
                                     _short(row.error, 160)) for row in failed]))
    return Section("downgrades", gettext_lazy("Active downgrades"), rows.count(), reverse("nodeconfig:emergency"), items,
                   gettext_lazy("No downgrade is active."))


def rollouts_in_flight(user: Any) -> Section | None:
    """Paced node-config rollouts not yet complete, and federated objects rolling out."""
    parts: list[str] = []
    items: list[Item] = []
    count = 0
    if may_any_or_role(user, "view", ConfigTarget):
        targets = restrict(ConfigTarget.objects.all(), user).filter(
            deleted=False, emergency=False, rollout_state__in=ROLLING_STATES).order_by("-updated")
        count += targets.count()
        labels = dict(ConfigTarget.RolloutState.choices)
        items += [Item(name, reverse("nodeconfig:target-detail", args=[pk]), str(labels[state]),
                       hot=state == ConfigTarget.RolloutState.FAILED)
                  for pk, name, state in targets.values_list("pk", "name", "rollout_state")[:SHOWN]]
        parts.append("nodeconfig:index")
    if may_any_or_role(user, "view", FederatedObject):
        rolling = restrict(FederatedObject.objects.all(), user).filter(phase=FederatedObject.Phase.ROLLING).order_by("-updated")
        count += rolling.count()
        items += [Item(_object_name(ns, kind, name), reverse("federation:object-detail", args=[pk]),
                       _("paused") if paused else str(FederatedObject.Phase.ROLLING.label))
                  for pk, ns, kind, name, paused in rolling.values_list("pk", "namespace", "kind", "name", "rollout_paused")[:SHOWN]]
        parts.append("federation:index")
    if not parts:
        return None
    return Section("rollouts", gettext_lazy("Rollouts in flight"), count, reverse(parts[0]), items[:SHOWN],
                   gettext_lazy("No rollout is in flight."))


def degraded_workloads(objects: QuerySet) -> Section:
    rows = objects.filter(phase__in=DEGRADED_PHASES).order_by("-updated")
    labels = dict(FederatedObject.Phase.choices)
    items = [Item(_object_name(ns, kind, name), reverse("federation:object-detail", args=[pk]),
                  _short(message) or str(labels[phase]), hot=True)
             for pk, ns, kind, name, phase, message in rows.values_list("pk", "namespace", "kind", "name", "phase", "message")[:SHOWN]]
    return Section("federation", gettext_lazy("Degraded federated workloads"), rows.count(),
                   reverse("federation:index") + "?phase=Degraded", items, gettext_lazy("No federated workload is degraded."))


def quota_groups_near_limit(groups: QuerySet) -> Section:
    """Groups whose fullest resource is at least ``NEAR_LIMIT`` used, fullest first: one indexed
    filter on the level every status write stores (``quotas.accounting.fill_level``)."""
    rows = groups.filter(level__gte=NEAR_LIMIT).order_by("-level", "name")
    items = [Item(name, reverse("quotas:group-detail", args=[name]), f"{level * 100:.0f}%", hot=level >= 1.0)
             for name, level in rows.values_list("name", "level")[:SHOWN]]
    return Section("quotas", gettext_lazy("Quota groups near their limit"), rows.count(), reverse("quotas:index"), items,
                   gettext_lazy("Every quota group has room."))


def _object_name(namespace: str, kind: str, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _short(message: str | None, length: int = 80) -> str:
    text = " ".join((message or "").split())
    return text if len(text) <= length else text[: length - 1] + "…"

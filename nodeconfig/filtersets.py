"""Node config's filters: the API's lists, and a target's node table on its page."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from .models import ConfigTarget, NodeConfig


class ConfigTargetFilterSet(django_filters.FilterSet):
    type = django_filters.CharFilter(field_name="config_type__name")
    cluster = django_filters.CharFilter(field_name="cluster__name")

    class Meta:
        model = ConfigTarget
        fields = ["type", "cluster", "emergency", "rollout_state", "valid", "deleted"]


STATE_Q = {
    "applied": Q(applied_hash=F("config_hash")) & ~Q(config_hash=""),
    "failed": ~Q(error="") & ~Q(applied_hash=F("config_hash")),
    "pending": Q(error="") & ~Q(applied_hash=F("config_hash")) & ~Q(config_hash=""),
    "held": Q(config_hash=""),
}


def current_q(target: ConfigTarget) -> Q:
    """Rows that run the target's current revision (directly, or under an emergency override)."""
    if target.emergency:
        return Q(revision_id=target.revision_id)
    return Q(revision_id=target.revision_id) | Q(base_revision_id=target.revision_id)


def node_state_q(target: ConfigTarget, state: str) -> Q:
    """STATE_Q relative to this target: a node still on an older revision is held back."""
    if state == "held":
        return STATE_Q["held"] | ~current_q(target)
    return STATE_Q[state] & current_q(target)


class NodeConfigFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    node = django_filters.CharFilter(field_name="node__name")
    type = django_filters.CharFilter(field_name="config_type__name")
    target = django_filters.NumberFilter(field_name="target_id")
    matched_target = django_filters.NumberFilter(field_name="matched_target_id")
    state = django_filters.ChoiceFilter(choices=[(s, s) for s in STATE_Q], method="filter_state")

    class Meta:
        model = NodeConfig
        fields = ["cluster", "node", "type", "target", "matched_target", "state"]

    def filter_state(self, queryset, name, value):
        return queryset.filter(STATE_Q[value])


class TargetNodeFilterSet(django_filters.FilterSet):
    """A target's node table (its page): by acknowledgement state relative to the target (a
    node still on an older revision is held back) and by cluster. A state that is none of
    them is a form error, not a 500."""

    STATES = [("applied", _("Applied")), ("failed", _("Failed")), ("pending", _("Pending")), ("held", _("Held"))]

    state = django_filters.ChoiceFilter(choices=STATES, method="filter_state", label=_("State"), empty_label=_("Any state"))
    cluster = django_filters.CharFilter(field_name="cluster__name", max_length=63, label=_("Cluster"))

    class Meta:
        model = NodeConfig
        fields = ["state", "cluster"]

    def __init__(self, *args: Any, target: ConfigTarget, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target = target

    def filter_state(self, queryset, name, value):
        return queryset.filter(node_state_q(self.target, value))

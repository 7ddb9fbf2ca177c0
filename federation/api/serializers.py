"""Federation API shapes. Input serializers only check the envelope (types, lengths); the
rules themselves (policy fields, object identity, replica counts) live in ``policy`` and
``services`` so the API, the pages and YAML imports refuse the same things the same way."""

from __future__ import annotations

from typing import Any

import yaml
from rest_framework import serializers

from kube.limits import deeper_than, too_deep_message

from ..models import FederatedObject, FederatedRevision, MemberObject, OverridePolicy, PropagationPolicy

#: Upper bound for a pasted manifest (a Deployment is a few KiB; a CRD instance rarely 1 MiB).
MAX_MANIFEST_CHARS = 2_000_000


def parse_manifest(text: str) -> Any:
    """One YAML document, loaded safely; refuses several documents and unparsable text."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise serializers.ValidationError({"manifest": f"not valid YAML{where}: {problem}"}) from None
    except RecursionError:
        raise serializers.ValidationError({"manifest": too_deep_message()}) from None
    if any(deeper_than(document) for document in documents):
        raise serializers.ValidationError({"manifest": too_deep_message()})
    if not documents:
        raise serializers.ValidationError({"manifest": "the manifest is empty"})
    if len(documents) > 1:
        raise serializers.ValidationError(
            {"manifest": f"give one object per request; the manifest has {len(documents)} documents"})
    if not isinstance(documents[0], dict):
        raise serializers.ValidationError({"manifest": "must be a Kubernetes object (a YAML mapping)"})
    return documents[0]


def policy_ref(policy: PropagationPolicy | OverridePolicy | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    return {"id": policy.pk, "namespace": policy.namespace, "name": policy.name}


# --------------------------------------------------------------------------- policies


class PolicySerializer(serializers.Serializer):
    """A propagation or override policy as written; ``object_count`` = objects bound to it."""

    id = serializers.IntegerField(read_only=True)
    namespace = serializers.CharField(read_only=True, help_text="Empty for a fleet-wide policy.")
    name = serializers.CharField(read_only=True)
    description = serializers.CharField(read_only=True)
    spec = serializers.JSONField(read_only=True)
    object_count = serializers.IntegerField(read_only=True, default=0, help_text="Federated objects using this policy.")
    created = serializers.DateTimeField(read_only=True)
    updated = serializers.DateTimeField(read_only=True)


class PolicyWriteSerializer(serializers.Serializer):
    """Create (namespace and name required once) or replace a policy's description and spec."""

    namespace = serializers.CharField(max_length=253, allow_blank=True, required=False, default="",
                                      help_text="Empty for a fleet-wide (cluster-scoped) policy.")
    name = serializers.CharField(max_length=253)
    description = serializers.CharField(max_length=500, allow_blank=True, required=False, default="")
    spec = serializers.JSONField(required=False, default=dict,
                                 help_text="Upstream KubeAdmiral field names (placement, clusterSelector, ...).")


class PolicyUpdateSerializer(serializers.Serializer):
    """Replace (PUT: ``spec`` required) or patch a policy; namespace and name cannot change."""

    namespace = serializers.CharField(max_length=253, allow_blank=True, required=False)
    name = serializers.CharField(max_length=253, required=False)
    description = serializers.CharField(max_length=500, allow_blank=True, required=False)
    spec = serializers.JSONField(required=False)


# --------------------------------------------------------------------------- objects


class MemberSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)

    class Meta:
        model = MemberObject
        fields = ["cluster", "replicas", "state", "error", "attempts", "next_retry", "applied_revision", "observed",
                  "updated"]
        read_only_fields = fields


class FederatedObjectSerializer(serializers.ModelSerializer):
    """The list shape: identity, where it runs and how it is doing."""

    key = serializers.CharField(read_only=True)
    policies = serializers.SerializerMethodField()

    class Meta:
        model = FederatedObject
        fields = ["id", "key", "namespace", "name", "api_version", "kind", "revision", "template_hash", "placement",
                  "status", "phase", "message", "rollout_paused", "deleting", "policies", "scheduled_at", "created",
                  "updated"]
        read_only_fields = fields

    def get_policies(self, obj: FederatedObject) -> dict[str, Any]:
        return {"propagation": policy_ref(obj.propagation_policy), "override": policy_ref(obj.override_policy)}


class FederatedObjectDetailSerializer(FederatedObjectSerializer):
    """Everything: template, the scheduler's explanation and every member cluster."""

    members = MemberSerializer(many=True, read_only=True)

    class Meta(FederatedObjectSerializer.Meta):
        fields = [*FederatedObjectSerializer.Meta.fields, "template", "references", "schedule", "members"]
        read_only_fields = fields


class ObjectInputSerializer(serializers.Serializer):
    """A native object as JSON (``object``) or as YAML text (``manifest``); exactly one."""

    object = serializers.JSONField(required=False, help_text="The native Kubernetes object as JSON.")
    manifest = serializers.CharField(required=False, max_length=MAX_MANIFEST_CHARS, trim_whitespace=False,
                                     help_text="The native object as YAML (one document).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if "object" in attrs and "manifest" in attrs:
            raise serializers.ValidationError({"manifest": "give object or manifest, not both"})
        if "manifest" in attrs:
            attrs["object"] = parse_manifest(attrs.pop("manifest"))
        elif "object" not in attrs and not self.partial:
            raise serializers.ValidationError({"object": "give the object (JSON) or a manifest (YAML)"})
        return attrs


class SubmitSerializer(ObjectInputSerializer):
    propagation_policy = serializers.CharField(max_length=507, required=False, allow_blank=True, allow_null=True,
                                               help_text="Policy name, or namespace/name; else the object's label.")
    override_policy = serializers.CharField(max_length=507, required=False, allow_blank=True, allow_null=True)
    change_cause = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class WhatIfSerializer(ObjectInputSerializer):
    policy = serializers.JSONField(help_text="A propagation policy's name (or namespace/name), or a policy spec.")

    def validate_policy(self, value: Any) -> Any:
        if not isinstance(value, (str, dict)) or not value:
            raise serializers.ValidationError("name a propagation policy or give a policy spec object")
        return value


class FederatedRevisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = FederatedRevision
        fields = ["number", "action", "template_hash", "reason", "rollback_of", "created_by", "created", "template"]
        read_only_fields = fields


class ExplainSerializer(serializers.Serializer):
    placement = serializers.DictField(child=serializers.IntegerField(allow_null=True))
    schedule = serializers.DictField()
    explanation = serializers.ListField(child=serializers.CharField())
    scheduled_at = serializers.DateTimeField(allow_null=True)


# --------------------------------------------------------------------------- planner


class PreferenceSerializer(serializers.Serializer):
    weight = serializers.IntegerField(min_value=0)
    minReplicas = serializers.IntegerField(min_value=0, required=False, default=0)
    maxReplicas = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields)) if isinstance(self.initial_data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: "unknown field" for name in unknown})
        high = attrs.get("maxReplicas")
        if high is not None and attrs["minReplicas"] > high:
            raise serializers.ValidationError(
                {"minReplicas": f"minReplicas ({attrs['minReplicas']}) exceeds maxReplicas ({high})"})
        return attrs


class PlannerSerializer(serializers.Serializer):
    """KubeAdmiral's Spread planner contract over plain input (no fleet, no database)."""

    total = serializers.IntegerField(min_value=0, max_value=10**9)
    clusters = serializers.ListField(child=serializers.CharField(max_length=253), max_length=10_000)
    preferences = serializers.DictField(child=serializers.JSONField(),
                                        help_text='Cluster name (or "*" for every other cluster) → '
                                                  "{weight, minReplicas?, maxReplicas?}.")
    current = serializers.DictField(child=serializers.JSONField(), required=False, default=dict,
                                    help_text="Replicas each cluster runs today.")
    capacity = serializers.DictField(child=serializers.JSONField(), required=False, default=dict,
                                     help_text="Estimated capacity per cluster; what does not fit is overflow.")
    limited_capacity = serializers.DictField(child=serializers.JSONField(), required=False, default=dict,
                                             help_text="Hard capacity per cluster (no overflow).")
    avoid_migration = serializers.BooleanField(required=False, default=False)
    key = serializers.CharField(max_length=600, required=False, allow_blank=True, default="",
                                help_text="Workload key (namespace/name) seeding the tie-break.")

    def validate_clusters(self, value: list[str]) -> list[str]:
        duplicates = sorted({c for c in value if value.count(c) > 1})
        if duplicates:
            raise serializers.ValidationError(f"listed twice: {', '.join(duplicates)}")
        if any(not c for c in value):
            raise serializers.ValidationError("cluster names must not be empty")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, Any] = {}
        known = set(attrs["clusters"])
        preferences = {}
        for name, raw in attrs["preferences"].items():
            if name != "*" and name not in known:
                errors[f"preferences.{name}"] = ["not in clusters"]
                continue
            if not isinstance(raw, dict):
                errors[f"preferences.{name}"] = ["must be an object {weight, minReplicas?, maxReplicas?}"]
                continue
            pref = PreferenceSerializer(data=raw)
            if not pref.is_valid():
                for field_name, messages in pref.errors.items():
                    errors[f"preferences.{name}.{field_name}"] = messages
                continue
            preferences[name] = pref.validated_data
        for field_name in ("current", "capacity", "limited_capacity"):
            for name, count in attrs[field_name].items():
                if name not in known:
                    errors[f"{field_name}.{name}"] = ["not in clusters"]
                elif not isinstance(count, int) or isinstance(count, bool) or count < 0:
                    errors[f"{field_name}.{name}"] = ["must be a non-negative integer"]
        if errors:
            raise serializers.ValidationError(errors)
        attrs["preferences"] = preferences
        return attrs


class PlanResultSerializer(serializers.Serializer):
    plan = serializers.DictField(child=serializers.IntegerField())
    overflow = serializers.DictField(child=serializers.IntegerField())


# --------------------------------------------------------------------------- clusters


class WaterLevelQuerySerializer(serializers.Serializer):
    hours = serializers.FloatField(required=False, min_value=0.01, max_value=24 * 366)
    cluster = serializers.CharField(required=False, max_length=63)

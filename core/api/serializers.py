from __future__ import annotations

from django.contrib.auth import authenticate
from django.utils.translation import gettext_lazy as _
from axes.exceptions import AxesBackendPermissionDenied
from rest_framework import exceptions, serializers

from ..models import APIToken, Job, ObjectChange


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"}, trim_whitespace=False)
    name = serializers.CharField(required=False, allow_blank=True, max_length=100)
    write_enabled = serializers.BooleanField(required=False, default=True)

    def validate(self, attrs):
        """django-axes counts failures per (username, address) in the database, for every
        process; a locked pair answers 429 like the browser login."""
        request = self.context.get("request")
        try:
            user = authenticate(getattr(request, "_request", request), username=attrs["username"], password=attrs["password"])
        except AxesBackendPermissionDenied as exc:
            raise exceptions.Throttled(detail=_("Too many failed logins for this user from this address; try again later.")) from exc
        if user is None or not user.is_active:
            raise serializers.ValidationError({"non_field_errors": [_("Unable to log in with the given credentials.")]})
        attrs["user"] = user
        return attrs


class TokenResponseSerializer(serializers.Serializer):
    token = serializers.CharField()
    expires = serializers.DateTimeField(allow_null=True)
    write_enabled = serializers.BooleanField()


class TokenCreateSerializer(serializers.Serializer):
    """A new token for the caller (``POST /api/v1/auth/tokens/``)."""

    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=100)
    write_enabled = serializers.BooleanField(required=False, default=True)
    ttl_days = serializers.IntegerField(required=False, min_value=1, max_value=3650, allow_null=True, default=None,
                                        help_text="Lifetime in days (default MERIDIAN_TOKEN_TTL_DAYS).")


class APITokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = APIToken
        fields = ["id", "name", "key_prefix", "write_enabled", "created", "expires", "last_used"]
        read_only_fields = fields


class JobSerializer(serializers.ModelSerializer):
    object_type = serializers.SlugRelatedField(slug_field="model", read_only=True)

    class Meta:
        model = Job
        fields = [
            "id", "kind", "status", "waiting_for", "triggered_by", "object_type", "object_id", "params", "result",
            "error", "log", "attempts", "created", "started", "finished",
        ]
        read_only_fields = fields


class ObjectChangeSerializer(serializers.ModelSerializer):
    object_type = serializers.SerializerMethodField()

    class Meta:
        model = ObjectChange
        fields = [
            "id", "time", "actor", "source", "request_id", "action", "verb", "object_type", "object_id",
            "object_repr", "before", "after", "reason",
        ]
        read_only_fields = fields

    def get_object_type(self, obj: ObjectChange) -> str | None:
        ct = obj.object_type
        return f"{ct.app_label}.{ct.model}" if ct else None

"""Cross-cutting records: API tokens, background jobs, the audit log, and the revision base."""

from __future__ import annotations

import hashlib
import secrets
from contextvars import ContextVar
from datetime import timedelta

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def hash_token(raw: str) -> str:
    """Tokens are stored as SHA-256: a leaked database does not leak usable credentials."""
    return hashlib.sha256(raw.encode()).hexdigest()


class APITokenQuerySet(models.QuerySet):
    def active(self) -> APITokenQuerySet:
        return self.filter(models.Q(expires__isnull=True) | models.Q(expires__gt=timezone.now()))


class APIToken(models.Model):
    """A user's token for automation; shown once at creation, stored hashed."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_prefix = models.CharField(max_length=8, help_text=_("First characters of the token, to tell tokens apart."))
    key_hash = models.CharField(max_length=64, unique=True)
    write_enabled = models.BooleanField(default=True, help_text=_("Read-only tokens may only use safe methods."))
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    objects = APITokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"

    @classmethod
    def issue(cls, user, *, name: str = "", write_enabled: bool = True, ttl: timedelta | None = None) -> tuple[APIToken, str]:
        """Create a token and return it with its raw key, which is never stored."""
        raw = secrets.token_urlsafe(32)
        ttl = ttl if ttl is not None else timedelta(days=settings.MERIDIAN_TOKEN_TTL_DAYS)
        token = cls.objects.create(
            user=user,
            name=name,
            key_prefix=raw[:8],
            key_hash=hash_token(raw),
            write_enabled=write_enabled,
            expires=timezone.now() + ttl if ttl else None,
        )
        return token, raw

    @property
    def is_expired(self) -> bool:
        return self.expires is not None and self.expires <= timezone.now()


class Job(models.Model):
    """The truth about one piece of background work; the UI and API read this row."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        WAITING = "waiting", _("Waiting")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELED = "canceled", _("Canceled")

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELED)
    #: Sent and not running: pending, or waiting for what ``waiting_for`` names (a lock).
    QUEUED = (Status.PENDING, Status.WAITING)
    UNFINISHED = (Status.PENDING, Status.WAITING, Status.RUNNING)

    kind = models.CharField(max_length=100, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    triggered_by = models.CharField(max_length=150, help_text=_("User name or system component."))
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    object_type = models.ForeignKey(ContentType, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    object_id = models.CharField(max_length=64, blank=True)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    #: What a waiting job waits for (e.g. a lock, and who holds it).
    waiting_for = models.CharField(max_length=300, blank=True, default="", db_default="")
    log = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True, db_index=True)
    #: What to send again when the message is lost (a dead worker, a Redis restart, a failed send).
    task_name = models.CharField(max_length=150, blank=True)
    task_args = models.JSONField(default=list, blank=True)
    task_kwargs = models.JSONField(default=dict, blank=True)
    #: ``<worker node name>:<pid>`` running it; the reaper requeues jobs whose worker is gone.
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    #: Workers that died running it (the reaper gives up after ``core.jobs.MAX_LOST_WORKERS``).
    lost_workers = models.PositiveSmallIntegerField(default=0, db_default=0)
    dispatched = models.DateTimeField(null=True, blank=True, help_text=_("When the task message was last sent."))
    #: The broker's run id when it was sent: a Redis restart loses queued messages, so the
    #: reaper sends a pending job again when the epoch changed.
    broker_epoch = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            models.Index(fields=["object_type", "object_id", "created"], name="core_job_object_idx"),
            models.Index(fields=["status", "created"], name="core_job_unfinished_idx",
                         condition=models.Q(status__in=["pending", "waiting", "running"])),
        ]
        permissions = [("cancel_job", "Can cancel a job")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.status})"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("console:job-detail", args=[self.pk])

    @property
    def duration(self) -> timedelta | None:
        if self.started is None:
            return None
        return (self.finished or timezone.now()) - self.started


#: Set (``core.audit.expire``) only while the retention task deletes expired entries.
AUDIT_RETENTION: ContextVar[bool] = ContextVar("meridian_audit_retention", default=False)


class AuditImmutable(PermissionDenied):
    """The audit log is append-only: an entry is never changed, and only the retention task
    deletes (expired ones). A ``PermissionDenied``, so a request that ever reached it is a 403."""


class ObjectChangeQuerySet(models.QuerySet):
    """No bulk update, and no delete outside retention: the ORM's paths around ``save``."""

    def update(self, **kwargs):
        raise AuditImmutable("audit log entries are never changed")

    def delete(self):
        if not AUDIT_RETENTION.get():
            raise AuditImmutable("audit log entries are deleted only by the retention task (core.audit.expire)")
        return super().delete()


class ObjectChange(models.Model):
    """One audit log entry: who changed what, when, from where, with before/after snapshots.

    Append-only: ``save`` of an existing entry, ``delete`` and the queryset's ``update`` and
    ``delete`` raise ``AuditImmutable`` (outside ``core.audit.expire``); on PostgreSQL a trigger
    (migration ``core.0005``) refuses the same at the database, for any client.
    """

    class Action(models.TextChoices):
        CREATE = "create", _("Created")
        UPDATE = "update", _("Updated")
        DELETE = "delete", _("Deleted")
        ACTION = "action", _("Action")

    time = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.CharField(max_length=150, help_text=_("Kept when the user is deleted."))
    source = models.CharField(max_length=16, default="system")
    request_id = models.UUIDField(null=True, blank=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    verb = models.CharField(max_length=64, blank=True, help_text=_("Domain verb such as rollback or emergency_downgrade."))
    object_type = models.ForeignKey(ContentType, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                    db_index=False)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)

    objects = ObjectChangeQuerySet.as_manager()

    class Meta:
        ordering = ["-time", "-pk"]
        # The log is filtered by object, request or actor and read newest first: each filter
        # with the time, or PostgreSQL walks the time index through a million rows for a few.
        indexes = [models.Index(fields=["object_type", "object_id", "time"], name="core_change_object_idx"),
                   models.Index(fields=["request_id", "time"], name="core_change_request_idx"),
                   models.Index(fields=["actor", "time"], name="core_change_actor_idx")]
        verbose_name = _("audit log entry")
        verbose_name_plural = _("audit log")

    def __str__(self) -> str:
        return f"{self.actor} {self.get_action_display()} {self.object_repr}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise AuditImmutable("audit log entries are never changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if not AUDIT_RETENTION.get():
            raise AuditImmutable("audit log entries are deleted only by the retention task (core.audit.expire)")
        return super().delete(*args, **kwargs)


class Revision(models.Model):
    """An immutable snapshot of what someone asked a thing to be: the base of every history.

    Node config targets, federated templates and quota groups keep their history in a
    concrete subclass (a foreign key to the owner plus the spec fields); ``spec()`` returns
    what a diff compares and a rollback restores, so diffs (``core.diff``) and rollbacks
    (``core.revisions``) work the same everywhere. "Current" is a pointer on the owner;
    restoring an old revision writes a new one with ``rollback_of`` set.
    """

    class Action(models.TextChoices):
        CREATE = "create", _("Created")
        UPDATE = "update", _("Updated")
        ROLLBACK = "rollback", _("Rolled back")
        DELETE = "delete", _("Deleted")
        RESTORE = "restore", _("Restored")

    number = models.PositiveIntegerField()
    action = models.CharField(max_length=16, choices=Action.choices, default=Action.UPDATE)
    rollback_of = models.PositiveIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    #: The foreign key to the owner, which ``__str__`` names.
    owner_field = ""

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{getattr(self, self.owner_field)} r{self.number}"

    def spec(self) -> dict:
        """The fields a diff compares and a rollback restores."""
        raise NotImplementedError

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValueError(f"{type(self).__name__} rows are immutable; write a new revision instead")
        super().save(*args, **kwargs)


def revision_meta(owner: str, constraint: str, *, ordering: str = "") -> type:
    """The ``Meta`` of a concrete :class:`Revision`: ordered by owner (or ``ordering``), newest
    first, and one row per owner and number (the constraint named ``constraint``)."""
    return type("Meta", (), {"ordering": [ordering or owner, "-number"],
                             "constraints": [models.UniqueConstraint(fields=[owner, "number"], name=constraint)]})


class Identity(models.Model):
    """A person at the identity provider (issuer + subject, the ID token's ``iss`` and ``sub``)
    and the Meridian user they sign in as (``core.sso``): the link survives a renamed username
    or email at the provider."""

    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities")
    #: The groups claim at the last sign-in (or access token that carried one).
    groups = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="core_identity_subject")]
        verbose_name_plural = _("identities")

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class RoleBinding(models.Model):
    """A role held on part of the fleet only (Argo CD's projects, NetBox's tenants): an operator
    of ``team-a``'s clusters, a viewer of a quota subtree, an operator of federation namespaces.

    The role's permissions (``core.roles``: viewer or operator) apply to the objects in the
    scope and nowhere else (``core.scopes`` turns bindings into object constraints of the one
    permission system). Admin is never scoped. ``source`` says who manages the binding: the
    Administration section (``manual``) or the single sign-on group mapping (``sso``), which
    replaces its own at every sign-in.
    """

    class Scope(models.TextChoices):
        CLUSTERS = "clusters", _("Clusters")
        QUOTA = "quota", _("Quota subtree")
        NAMESPACES = "namespaces", _("Federation namespaces")

    class Source(models.TextChoices):
        MANUAL = "manual", _("Administration")
        SSO = "sso", _("Single sign-on group")

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_bindings")
    role = models.CharField(max_length=16)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    #: Clusters' names, quota groups' names (each with its subtree) or namespaces.
    names = models.JSONField(default=list, blank=True)
    #: Clusters only: a label selector over the clusters' labels (as well as ``names``).
    selector = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.MANUAL)
    #: The provider group a ``sso`` binding comes from.
    group = models.CharField(max_length=255, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["user_id", "scope", "pk"]
        indexes = [models.Index(fields=["user", "scope"], name="core_rolebinding_user_idx")]

    def __str__(self) -> str:
        what = ", ".join(self.names) + (f" + {self.selector}" if self.selector else "")
        return f"{self.role} of {self.get_scope_display().lower()} {what or '—'}"

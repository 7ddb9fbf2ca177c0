from datetime import timedelta

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """Scheduling policies, templates and bindings; placement simulator; CPU co-location."""

    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        self.ready_policies()
        self.ready_cpu()

    def ready_policies(self) -> None:
        """Part A (unified scheduling): operator verbs, the live topic, the default policy, the
        fleet simulator's placement engine, and the pod scheduler of watched member clusters."""
        from django.db.models.signals import post_migrate

        from core.backup import database_restored
        from core.events import register_topic_kind
        from core.roles import grant_to_operators

        from . import fleet_placer, podscheduler
        from .admission import forget_version
        from .documents import register_documents
        from .models import SchedulingPolicy
        from .services import ClusterPolicies, ensure_default_policy

        grant_to_operators(*(f"scheduling.{verb}_{model}"
                             for model in ("schedulingpolicy", "nodeschedulerconfig", "podschedulerconfig",
                                           "schedulerconfigbinding")
                             for verb in ("add", "change", "delete", "rollback")))
        register_topic_kind("scheduling", model=SchedulingPolicy)
        post_migrate.connect(ensure_default_policy, sender=self, dispatch_uid="scheduling-default-policy")
        fleet_placer.register(ClusterPolicies())  # the fleet simulator places pods under each cluster's policy
        database_restored.connect(forget_version, dispatch_uid="scheduling-forget-config-version")
        register_documents()  # policies, templates and bindings as meridian.io/v1 documents (config as code)
        podscheduler.register()  # member clusters' pods named for Meridian, scheduled beside each cluster's watcher

    def ready_cpu(self) -> None:
        """Part B (CPU co-location): operator verbs, and a reconcile after inventory syncs."""
        from core.backup import database_restored
        from core.roles import grant_to_operators
        from fleet.signals import nodes_changed, workloads_changed

        from .cpu import tasks  # noqa: F401  (registered here too, so web processes send deliveries at once)
        from .cpu.agent import forget_agent_bodies

        grant_to_operators("scheduling.allocate_nodecpu", "scheduling.release_isolate_nodecpu", "scheduling.change_nodecpu")
        _scope()
        nodes_changed.connect(_queue_cpu_reconcile, dispatch_uid="scheduling-cpu-nodes-changed")
        workloads_changed.connect(_queue_cpu_reconcile, dispatch_uid="scheduling-cpu-workloads-changed")
        database_restored.connect(forget_agent_bodies, dispatch_uid="scheduling-forget-cpuset-bodies")


def _scope() -> None:
    """Cluster bindings reach the CPU state of their clusters' nodes (scheduling policies and
    templates are fleet-wide: a fleet-wide role's)."""
    from core import scopes
    from core.models import RoleBinding

    from .models import CPUAllocation, CPUClaim, NodeCPU

    clusters = RoleBinding.Scope.CLUSTERS
    scopes.register_scoped(NodeCPU, clusters, via="cluster", subject=True)
    for model in (CPUAllocation, CPUClaim):
        scopes.register_scoped(model, clusters, via="node_cpu__cluster")


def _queue_cpu_reconcile(sender, cluster, **_) -> None:
    """A sync changed nodes or workloads of a cluster that uses CPU co-location: reconcile it
    (once: a reconcile job still waiting to start reads the newest state anyway), and not
    sooner than ``MERIDIAN_CPU_RECONCILE_SPACING_SECONDS`` after the cluster's last one started.

    A busy cluster's every sync changes something (Jobs start and finish each tick): at 10,000
    nodes a reconcile after each kept both worker processes busy and rollout steps expired."""
    from django.conf import settings
    from django.contrib.contenttypes.models import ContentType
    from django.db.models import Q
    from django.utils import timezone

    from core.jobs import enqueue
    from core.models import Job

    from .cpu.store import RECONCILE_TASK
    from .models import NodeCPU

    if not NodeCPU.objects.filter(cluster_id=cluster.pk).exists():
        return
    now = timezone.now()
    spacing = timedelta(seconds=settings.MERIDIAN_CPU_RECONCILE_SPACING_SECONDS)
    mine = Job.objects.filter(task_name=RECONCILE_TASK).filter(  # enqueued for the cluster, or the periodic pass's
        Q(object_id=str(cluster.pk), object_type=ContentType.objects.get_for_model(type(cluster))) | Q(task_args__0=cluster.name))
    if mine.filter(status__in=Job.QUEUED).exists():
        return
    last = mine.filter(started__gt=now - spacing).order_by("-started").values_list("started", flat=True).first()
    not_before = now if last is None else last + spacing
    enqueue(RECONCILE_TASK, cluster.name, obj=cluster, params={"not_before": not_before.isoformat()},
            countdown=(not_before - now).total_seconds() or None)

"""Background work of CPU co-location: deliver annotations, reconcile nodes from them.

* ``scheduling.cpu_deliver(node_cpu_id)``: write the node's ``cpu-sharepool`` and its pods'
  ``alloc-status`` / ``custom-cgroup-info`` / ... from the committed rows (``core.jobs.enqueue``
  sends it after the change commits and re-sends it until it has run; transient connector
  faults are retried by ``core.taskbase.MeridianTask``).
* ``scheduling.cpu_reconcile_cluster(cluster_name)``: rebuild every CPU node of the cluster from
  its pods' annotations, release what leaked, adopt what was annotated elsewhere, report
  conflicts (after each inventory sync that changed nodes or workloads, and periodically).
* ``scheduling.cpu_reconcile_all()``: periodic (beat, ``MERIDIAN_CPU_RECONCILE_SECONDS``): one
  reconcile job per cluster that has CPU nodes; catches pods deleted between syncs.
"""

from __future__ import annotations

from celery import shared_task
from django.db.models import Q

from core.context import acting_as
from core.locks import hold
from core.taskbase import always_idle, idle_unless
from fleet.models import Cluster, Node

from ..models import NodeCPU
from . import delivery, reconcile


@shared_task(name="scheduling.cpu_deliver", ignore_result=True)
def cpu_deliver(node_cpu_id: int) -> dict | None:
    with acting_as("system:cpu-delivery"):
        report = delivery.deliver(node_cpu_id)
    return report.as_dict() if report is not None else None


#: A periodic pass that found every node as it left it records no job: on the idle 2,000-node
#: demo 37 of 50 passes in ten minutes did nothing, each a Job row (~5,300 a day).
reconciled_nothing = idle_unless("nodes", "released_count", "adopted_count", "conflicts", "errors")


@shared_task(name="scheduling.cpu_reconcile_cluster", ignore_result=True, on_busy="skip",
             idle=staticmethod(reconciled_nothing))
def cpu_reconcile_cluster(cluster_name: str) -> dict | None:
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        return None
    with hold(f"scheduling-cpu-reconcile/{cluster_name}"), acting_as("system:cpu-reconciler"):
        return reconcile.reconcile_cluster(cluster).as_dict()


@shared_task(name="scheduling.cpu_reconcile_all", ignore_result=True, idle=staticmethod(always_idle))
def cpu_reconcile_all() -> dict:
    with_topology = Node.objects.filter(cpu_topology__isnull=False).values("cluster_id")
    names = list(Cluster.objects.filter(Q(pk__in=NodeCPU.objects.values("cluster_id")) | Q(pk__in=with_topology))
                 .values_list("name", flat=True))
    for name in names:
        cpu_reconcile_cluster.delay(name)
    return {"clusters": len(names)}

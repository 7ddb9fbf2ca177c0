"""Signals other apps listen to, so the inventory needs to know nothing about them."""

from django.dispatch import Signal

#: Sent inside a sync's transaction, with ``cluster`` and ``names`` of the nodes created or
#: changed: listeners enqueue their work (``core.jobs.enqueue``), which commits with the sync.
nodes_changed = Signal()

#: Sent inside a sync's transaction, with ``cluster`` and ``keys`` ((namespace, kind, name)) of
#: the workloads created, changed or gone.
workloads_changed = Signal()

#: Sent inside the transaction that cordons, drains or uncordons ``cluster``, so listeners
#: (the federation scheduler) change what depends on it in the same commit.
cluster_cordoned = Signal()

#: Sent before finished pods are deleted (``fleet.services.expire_finished_pods``). A receiver
#: returns the earliest ``finished_at`` it still has to read (None: nothing), and no pod that
#: finished after it is deleted: quotas' cash budgets accrue the spans of pods since their last pass.
finished_pods_needed = Signal()

"""CPU co-location (Alibaba's exclusive/shared scheme, scheduling.md Part B), laid out by what
each module is. Nothing is imported here: the pure modules stay free of Django.

Pure (plain data, no Django; the scheduler's plugins, the fleet simulator and the node agent
run the same functions):

* ``cpuset`` — node CPU topology, cpuset lists, IO-queue distributions and the allocator
  (``scheduling.cpuset``, its path in the contracts, re-exports it).
* ``state`` — one node's CPU state: share pool, sellable rules, machineMaxList, the
  annotations, and ``rebuild_state`` from pods' annotations.
* ``fit`` — filter, score, what-if and the eight-integer ``NodeSummary`` of the fleet view.

Their decisions made durable (the models are ``scheduling.models.cpu``):

* ``store`` — a node's state built from its rows; the node's row lock, the guarded version
  bump, the claims table and the delivery request every write shares. One writer per node:
  Redis plays no part in correctness.
* ``allocation`` — allocate, place shared, release, release-isolate, node settings; each
  under the row lock, audited in its transaction, and delivered by a job.
* ``inputs`` — what a node publishes (topology, IO queues, reserved CPUs, overcommit ratio),
  taken only as a valid growth.
* ``capacity`` — reads: one node's what-if, the candidates for a request, the fleet view.
* ``delivery`` — the annotations the rows call for, written through the cluster's connector
  (``scheduling.cpu_deliver``).
* ``reconcile`` — rows rebuilt from the pods' annotations (``scheduling.cpu_reconcile_cluster``):
  nothing leaks, what was annotated elsewhere is adopted.
* ``binding`` — exclusive CPUs given when Meridian's scheduler binds a pod.
* ``agent`` — what a node agent reads (payload, ETag, the body cache's key).

Around them: ``tasks`` (Celery; task names ``scheduling.cpu_*``, unchanged), ``forms`` +
``tables`` + ``views`` (the pages; URL names ``scheduling:cpu-*``; the fleet page's filters are
``scheduling.filtersets.CPUFleetFilterSet``), ``agent_views`` (the agent endpoint
``/api/agent/v1/clusters/{c}/nodes/{n}/cpuset``). The REST API is ``scheduling.api.cpu``, the
scheduler plugins ``scheduling.plugins.cpuset``.
"""

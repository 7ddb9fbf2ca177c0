"""CPU co-location REST API (``/api/v1/scheduling/cpu/…``): thin viewsets over ``scheduling.cpu``
(``allocation``, ``inputs``, ``capacity``).

- ``cpu/nodes/`` (cursor pages; ``?cluster=&name=&fits=<cpus>``), ``cpu/nodes/{id}/`` (ETag;
  ``PATCH`` reserved CPUs / overcommit ratio, If-Match honoured), and per node:
  ``map/`` (the CPU map), ``allocate/`` (exclusive), ``place-shared/``, ``release/``,
  ``release-isolate/``, ``io-queues/``, ``reconcile/``, ``what-if/``;
- ``cpu/allocations/`` (read-only; ``?node=&cluster=&namespace=&app=&mode=&delivery=``);
- ``cpu/fleet/`` (sellable exclusive CPUs and fragmentation, fleet and per cluster, from SQL
  aggregates of the stored summaries) and ``cpu/what-if/`` (which nodes can take N CPUs).

Verbs: ``allocate`` (allocate, place-shared, release, what-if), ``release_isolate``,
``change`` (settings, IO queues, reconcile). Refusals answer the one error body: 409 with
the rule's reason (``insufficient_cpu``, ``instance_cap``, ``machine_max``, ``exists`` …),
400 for bad input, 412 for a stale ``If-Match``.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from core import concurrency, jobs
from core.api.pagination import LargeCursorPagination
from core.api.viewsets import DryRunMixin, MeridianViewSetMixin, WriteThroughServicesMixin
from core.errors import Refused
from core.permissions import restrict
from kube.quantity import QuantityError, parse_quantity

from ..cpu import allocation, capacity, inputs, store
from ..cpu.cpuset import SAME_CORE_FIRST, STRATEGIES, format_cpuset
from ..cpu.state import cpu_map
from ..models import CPUAllocation, NodeCPU

# ---------------------------------------------------------------------------- serializers


class CPUAllocationSerializer(serializers.ModelSerializer):
    node = serializers.IntegerField(source="node_cpu_id", read_only=True)
    node_name = serializers.CharField(source="node_cpu.name", read_only=True)
    cluster = serializers.CharField(source="node_cpu.cluster.name", read_only=True)
    name = serializers.CharField(source="pod_name", read_only=True)
    uid = serializers.CharField(source="pod_uid", read_only=True)
    instance = serializers.CharField(read_only=True)
    etag = serializers.SerializerMethodField()

    class Meta:
        model = CPUAllocation
        fields = ["id", "node", "node_name", "cluster", "instance", "namespace", "name", "uid", "app", "mode", "strategy",
                  "request", "cpus", "cpuset", "request_milli", "limit_milli", "release_isolate", "exclude_reserved",
                  "containers", "disputed", "source", "delivery", "delivered_at", "delivery_error", "created_by", "created",
                  "updated", "etag"]
        read_only_fields = fields

    def get_etag(self, obj: CPUAllocation) -> str:
        return concurrency.etag(obj)


SUMMARY = ["sellable", "exclusive_used", "exclusive_left", "largest_exclusive", "largest_numa", "free_whole_cores", "stranded",
           "shared_sold_milli"]


class NodeCPUSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    node = serializers.IntegerField(source="node_id", read_only=True)
    overcommit_ratio = serializers.DecimalField(max_digits=7, decimal_places=3, coerce_to_string=True, read_only=True)
    fragmentation = serializers.FloatField(read_only=True)
    etag = serializers.SerializerMethodField()

    class Meta:
        model = NodeCPU
        fields = ["id", "cluster", "name", "node", "cpus", "sockets", "numa_nodes", "cores", "threads_per_core",
                  "reserved_cpus", "overcommit_ratio", "version", "delivered_version", *SUMMARY, "fragmentation",
                  "io_queue_state", "reconciled_at", "etag", "updated"]
        read_only_fields = fields

    def get_etag(self, obj: NodeCPU) -> str:
        return concurrency.etag(obj)


class NodeCPUDetailSerializer(NodeCPUSerializer):
    share_pool = serializers.SerializerMethodField()
    allocations = serializers.SerializerMethodField()

    class Meta(NodeCPUSerializer.Meta):
        fields = [*NodeCPUSerializer.Meta.fields, "topology", "io_queues", "io_queue_message", "refused_io_queues",
                  "topology_message", "conflicts", "problems", "share_pool", "allocations"]
        read_only_fields = fields

    def get_share_pool(self, obj: NodeCPU) -> str:
        return format_cpuset(store.current_state(obj).share_pool)

    def get_allocations(self, obj: NodeCPU) -> list[dict[str, Any]]:
        rows = obj.allocations.select_related("node_cpu__cluster").order_by("namespace", "pod_name")
        return CPUAllocationSerializer(rows, many=True).data


def _machine_max(value: Any) -> dict[str, int] | None:
    try:
        return allocation.parse_machine_max(value)
    except Refused as exc:
        raise serializers.ValidationError(exc.detail) from exc


class CPUInstanceFields(serializers.Serializer):
    namespace = serializers.CharField(max_length=253)
    name = serializers.CharField(max_length=253)
    uid = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    app = serializers.CharField(max_length=253, required=False, allow_blank=True, default="")
    containers = serializers.ListField(child=serializers.CharField(max_length=253), required=False, min_length=1,
                                       max_length=50, default=lambda: ["engine"])
    machine_max = serializers.JSONField(required=False, default=None, help_text='machineMaxList: [{"key": app, "value": n}]')
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)

    def validate_machine_max(self, value: Any) -> dict[str, int] | None:
        return _machine_max(value)


class CPUAllocateSerializer(CPUInstanceFields):
    request = serializers.IntegerField(min_value=0, max_value=100_000, help_text="Exclusive CPUs (ignored by BindAllCPUs).")
    strategy = serializers.ChoiceField(choices=STRATEGIES, default=SAME_CORE_FIRST)
    exclude_reserved = serializers.BooleanField(default=True)
    release_isolate = serializers.BooleanField(default=False)


def _milli(value: str, field: str) -> int:
    try:
        quantity = parse_quantity(str(value))
    except QuantityError as exc:
        raise serializers.ValidationError({field: [str(exc)]}) from exc
    milli = quantity.milli_value()
    if milli < 0:
        raise serializers.ValidationError({field: ["Must not be negative."]})
    return milli


class CPUPlaceSharedSerializer(CPUInstanceFields):
    cpu_request = serializers.CharField(max_length=32, help_text='CPU request (shares), a quantity: "8", "500m".')
    cpu_limit = serializers.CharField(max_length=32, required=False, allow_blank=True, default="",
                                      help_text="CPU limit (CFS quota); empty: no limit.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["request_milli"] = _milli(attrs["cpu_request"], "cpu_request")
        attrs["limit_milli"] = _milli(attrs["cpu_limit"], "cpu_limit") if attrs.get("cpu_limit") else 0
        if not attrs["request_milli"] and not attrs["limit_milli"]:
            raise serializers.ValidationError({"cpu_request": ["A shared instance needs a CPU request or limit."]})
        return attrs


class CPUInstanceSerializer(serializers.Serializer):
    instance = serializers.CharField(max_length=507, help_text="namespace/name")
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)

    def validate_instance(self, value: str) -> str:
        namespace, slash, name = value.partition("/")
        if not slash or not namespace or not name:
            raise serializers.ValidationError("Write the instance as namespace/name.")
        return value


class CPUReleaseIsolateSerializer(CPUInstanceSerializer):
    on = serializers.BooleanField(help_text="true: run on every CPU but the reserved ones; false: back to its cpuset.")


class NodeCPUConfigureSerializer(serializers.Serializer):
    reserved_cpus = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    overcommit_ratio = serializers.DecimalField(max_digits=7, decimal_places=3, required=False, min_value=0)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class NodeCPUIOQueuesSerializer(serializers.Serializer):
    queues = serializers.DictField(child=serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=1),
                                   help_text='{"<queue>": [cpu, ...]}')
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class CPUWhatIfSerializer(serializers.Serializer):
    request = serializers.IntegerField(min_value=1, max_value=100_000)
    strategy = serializers.ChoiceField(choices=STRATEGIES, default=SAME_CORE_FIRST)
    app = serializers.CharField(max_length=253, required=False, allow_blank=True, default="")
    machine_max = serializers.JSONField(required=False, default=None)
    cluster = serializers.CharField(max_length=63, required=False, allow_blank=True, default="")
    limit = serializers.IntegerField(min_value=1, max_value=200, required=False, default=20)

    def validate_machine_max(self, value: Any) -> dict[str, int] | None:
        return _machine_max(value)


def what_if_data(answer: Any) -> dict[str, Any]:
    data = {"ok": answer.ok, "reason": answer.reason, "detail": answer.detail, "cpus": list(answer.cpus),
            "cpuset": answer.cpuset, "scope": answer.scope}
    for key in ("before", "after"):
        summary = getattr(answer, key)
        data[key] = summary._asdict() if summary is not None else None
    return data


# ---------------------------------------------------------------------------- filters


class NodeCPUFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(field_name="name")
    fits = django_filters.NumberFilter(field_name="largest_exclusive", lookup_expr="gte",
                                       help_text="Nodes that can take an exclusive instance of this many CPUs now.")
    io_queue_state = django_filters.ChoiceFilter(choices=NodeCPU.IOQueueState.choices)

    class Meta:
        model = NodeCPU
        fields = ["cluster", "name", "fits", "io_queue_state"]


class CPUAllocationFilterSet(django_filters.FilterSet):
    node = django_filters.NumberFilter(field_name="node_cpu_id")
    cluster = django_filters.CharFilter(field_name="node_cpu__cluster__name")
    node_name = django_filters.CharFilter(field_name="node_cpu__name")

    class Meta:
        model = CPUAllocation
        fields = ["node", "cluster", "node_name", "namespace", "pod_name", "app", "mode", "delivery", "source", "disputed"]


# ---------------------------------------------------------------------------- viewsets


class NodeCPUViewSet(MeridianViewSetMixin, WriteThroughServicesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     viewsets.GenericViewSet):
    """Nodes' CPU topology, settings, summary and allocations; the allocator's actions."""

    queryset = NodeCPU.objects.select_related("cluster")
    serializer_class = NodeCPUSerializer
    write_serializer_class = NodeCPUConfigureSerializer
    filterset_class = NodeCPUFilterSet
    pagination_class = LargeCursorPagination
    http_method_names = ["get", "post", "patch", "head", "options"]

    def get_serializer_class(self):
        if self.action == "retrieve":
            return NodeCPUDetailSerializer
        return super().get_serializer_class()

    def partial_update(self, request, *args, **kwargs):
        return self.update(request, *args, partial=True, **kwargs)

    def perform_update(self, obj: NodeCPU, data: dict[str, Any], *, partial: bool) -> NodeCPU:
        ratio = data.get("overcommit_ratio")
        return allocation.configure(obj, reserved_cpus=data.get("reserved_cpus"), overcommit_ratio=ratio,
                                  reason=data.get("reason", ""))

    def respond_node(self, node: NodeCPU, status_code: int = status.HTTP_200_OK) -> Response:
        return self.respond(node, status_code, serializer_class=NodeCPUDetailSerializer)

    def update(self, request, *args, **kwargs):
        partial = kwargs.pop("partial", False)
        obj = self.get_object()
        data = self.valid(NodeCPUConfigureSerializer, partial=partial)
        return self.respond_node(self.perform_update(obj, data, partial=partial))

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], url_path="map")
    def cpu_map(self, request, pk=None):
        """Every logical CPU in topology order: socket, NUMA node, core, owner role and instance, IO queues."""
        node = self.get_object()
        cells = cpu_map(store.current_state(node))
        return Response({"node": node.name, "cpus": [c.__dict__ for c in cells]})

    @extend_schema(request=CPUAllocateSerializer, responses={201: CPUAllocationSerializer})
    @action(detail=True, methods=["post"], verb="allocate")
    def allocate(self, request, pk=None):
        """Dedicated CPUs for an instance (``alloc-spec`` strategy); refused with the rule's reason."""
        node = self.get_object()
        data = self.valid(CPUAllocateSerializer)
        row = allocation.allocate_exclusive(
            node, namespace=data["namespace"], name=data["name"], uid=data["uid"], app=data["app"], request=data["request"],
            strategy=data["strategy"], machine_max=data["machine_max"], exclude_reserved=data["exclude_reserved"],
            containers=data["containers"], release_isolate=data["release_isolate"], reason=data["reason"])
        return self.respond(row, status.HTTP_201_CREATED, serializer_class=CPUAllocationSerializer)

    @extend_schema(request=CPUPlaceSharedSerializer, responses={201: CPUAllocationSerializer})
    @action(detail=True, methods=["post"], url_path="place-shared", verb="allocate")
    def place_shared(self, request, pk=None):
        """A shared instance on the share pool (CPU shares from the request, CFS quota from the limit)."""
        node = self.get_object()
        data = self.valid(CPUPlaceSharedSerializer)
        row = allocation.place_shared(node, namespace=data["namespace"], name=data["name"], uid=data["uid"], app=data["app"],
                                    request_milli=data["request_milli"], limit_milli=data["limit_milli"],
                                    machine_max=data["machine_max"], containers=data["containers"], reason=data["reason"])
        return self.respond(row, status.HTTP_201_CREATED, serializer_class=CPUAllocationSerializer)

    @extend_schema(request=CPUInstanceSerializer, responses={200: CPUAllocationSerializer})
    @action(detail=True, methods=["post"], verb="allocate")
    def release(self, request, pk=None):
        """Give an instance's CPUs back to the share pool (its annotations are then removed)."""
        node = self.get_object()
        data = self.valid(CPUInstanceSerializer)
        row = allocation.release(node, data["instance"], reason=data["reason"])
        return Response(CPUAllocationSerializer(row).data)

    @extend_schema(request=CPUReleaseIsolateSerializer, responses={200: CPUAllocationSerializer})
    @action(detail=True, methods=["post"], url_path="release-isolate", verb="release_isolate")
    def release_isolate(self, request, pk=None):
        """Big-sale emergency: let an exclusive instance use every CPU but the reserved ones (reversible)."""
        node = self.get_object()
        data = self.valid(CPUReleaseIsolateSerializer)
        row = allocation.set_release_isolate(node, data["instance"], data["on"], reason=data["reason"])
        return self.respond(row, serializer_class=CPUAllocationSerializer)

    @extend_schema(request=NodeCPUIOQueuesSerializer, responses={200: NodeCPUDetailSerializer})
    @action(detail=True, methods=["post"], url_path="io-queues", verb="change")
    def io_queues(self, request, pk=None):
        """Offer an IO-queue distribution: accepted only as a valid growth (409 ``io_queues_refused`` otherwise)."""
        node = self.get_object()
        data = self.valid(NodeCPUIOQueuesSerializer)
        return self.respond_node(inputs.propose_io_queues(node, data["queues"], reason=data["reason"]))

    @extend_schema(request=None, responses={202: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"], verb="change")
    def reconcile(self, request, pk=None):
        """Rebuild the node's state from its pods' annotations now (a job; its id is returned)."""
        node = self.get_object()
        job = jobs.enqueue(store.RECONCILE_TASK, node.cluster.name, obj=node.cluster)
        return Response({"job": job.pk}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=CPUWhatIfSerializer, responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"], url_path="what-if", verb="allocate", preview=True)
    def what_if(self, request, pk=None):
        """Could this node take an exclusive instance of N CPUs now? Where, or why not. Changes nothing."""
        node = self.get_object()
        data = self.valid(CPUWhatIfSerializer)
        answer = capacity.what_if(node, data["request"], data["strategy"], data["app"], data["machine_max"])
        return Response({"node": node.name, "cluster": node.cluster.name, **what_if_data(answer)})


class CPUAllocationViewSet(MeridianViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Instances holding CPUs (exclusive cpusets, shared shares), with their delivery state."""

    queryset = CPUAllocation.objects.select_related("node_cpu__cluster")
    serializer_class = CPUAllocationSerializer
    filterset_class = CPUAllocationFilterSet
    pagination_class = LargeCursorPagination


def _nodes(cluster: str) -> QuerySet:
    queryset = NodeCPU.objects.all()
    if cluster:
        queryset = queryset.filter(cluster__name=cluster)
    return queryset


class FleetCPUView(APIView):
    """Sellable exclusive CPUs and fragmentation, fleet-wide and per cluster (summary columns only)."""

    required_permissions = {"GET": ["scheduling.view_nodecpu"], "HEAD": ["scheduling.view_nodecpu"]}
    scoped_rules = True  # a scoped role sees its clusters' nodes

    @extend_schema(parameters=[OpenApiParameter("cluster", str), OpenApiParameter("request", int)],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        raw = request.query_params.get("request") or ""
        if raw and (not raw.isdigit() or not 0 < int(raw) <= 100_000):
            raise Refused("invalid", _("request is a whole number of CPUs (1-100000)."), field="request")
        nodes = restrict(_nodes(request.query_params.get("cluster", "")), request.user)
        view = capacity.fleet_view(nodes, int(raw) if raw else None)
        return Response(view)


class FleetWhatIfView(DryRunMixin, APIView):
    """Which nodes can take an exclusive instance of N CPUs now (best fit first), and how many can."""

    required_permissions = {"POST": ["scheduling.allocate_nodecpu"]}
    preview = True

    @extend_schema(request=CPUWhatIfSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request):
        body = CPUWhatIfSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        found = capacity.candidates(_nodes(data["cluster"]).select_related("cluster"), data["request"], data["strategy"],
                                    data["app"], data["machine_max"], limit=data["limit"])
        nodes = [{"id": item["node"].pk, "cluster": item["node"].cluster.name, "node": item["node"].name,
                  "largest_exclusive": item["node"].largest_exclusive, **what_if_data(item["what_if"])}
                 for item in found["nodes"]]
        fitting = [n for n in nodes if n["ok"]]
        reason = "" if fitting else (
            f"no node can take an exclusive instance of {data['request']} CPUs now" if not found["count"] else
            "; ".join(sorted({n["reason"] for n in nodes if not n["ok"]})))
        return Response({"request": data["request"], "strategy": data["strategy"], "count": found["count"],
                         "ok": bool(fitting), "reason": reason, "nodes": nodes})

"""Scheduling's machine endpoints under ``/api/agent/v1/`` (next to node config's agent API)."""

from django.urls import path

from .cpu import agent_views as cpu_agent_views

urlpatterns = [
    path("clusters/<str:cluster>/nodes/<str:node>/cpuset", cpu_agent_views.node_cpuset, name="agent-node-cpuset"),
]

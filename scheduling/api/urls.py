from django.urls import path
from rest_framework.routers import SimpleRouter

from . import cpu, views

app_name = "scheduling-api"

router = SimpleRouter()
# Part A: unified scheduling (policies, templates, bindings, import/export, preview, simulator, webhook)
router.register("policies", views.SchedulingPolicyViewSet)
router.register("node-scheduler-configs", views.NodeSchedulerConfigViewSet)
router.register("pod-scheduler-configs", views.PodSchedulerConfigViewSet)
router.register("bindings", views.SchedulerConfigBindingViewSet)
# Part B: CPU co-location
router.register("cpu/nodes", cpu.NodeCPUViewSet, basename="nodecpu")
router.register("cpu/allocations", cpu.CPUAllocationViewSet, basename="cpuallocation")

urlpatterns = [
    path("import/", views.ImportView.as_view(), name="import"),
    path("export/", views.ExportView.as_view(), name="export"),
    path("preview/", views.PreviewView.as_view(), name="preview"),
    path("simulate/", views.SimulateView.as_view(), name="simulate"),
    path("webhook-configuration/<str:cluster>/", views.WebhookConfigurationView.as_view(), name="webhook-configuration"),
    path("cpu/fleet/", cpu.FleetCPUView.as_view(), name="cpu-fleet"),
    path("cpu/what-if/", cpu.FleetWhatIfView.as_view(), name="cpu-what-if"),
    *router.urls,
]

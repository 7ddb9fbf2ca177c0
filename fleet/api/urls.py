from rest_framework.routers import SimpleRouter

from . import views

app_name = "fleet-api"

router = SimpleRouter()
router.register("clusters", views.ClusterViewSet)
router.register("nodes", views.NodeViewSet)
router.register("workloads", views.WorkloadViewSet)
router.register("pods", views.PodViewSet)

urlpatterns = [*router.urls]

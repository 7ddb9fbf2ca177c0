from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

app_name = "nodeconfig-api"

router = SimpleRouter()
router.register("types", views.ConfigTypeViewSet)
router.register("targets", views.ConfigTargetViewSet)
router.register("node-configs", views.NodeConfigViewSet)

urlpatterns = [
    path("emergency-downgrade/", views.EmergencyDowngradeView.as_view(), name="emergency-downgrade"),
    path("emergency-downgrade/<int:pk>/restore/", views.EmergencyRestoreView.as_view(), name="emergency-restore"),
    *router.urls,
]

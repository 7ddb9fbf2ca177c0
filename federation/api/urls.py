from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

app_name = "federation-api"

router = SimpleRouter()
router.register("propagation-policies", views.PropagationPolicyViewSet, basename="propagationpolicy")
router.register("override-policies", views.OverridePolicyViewSet, basename="overridepolicy")
router.register("objects", views.FederatedObjectViewSet, basename="federatedobject")

urlpatterns = [
    path("what-if/", views.WhatIfView.as_view(), name="what-if"),
    path("planner/", views.PlannerView.as_view(), name="planner"),
    path("water-levels/", views.WaterLevelsView.as_view(), name="water-levels"),
    *router.urls,
]

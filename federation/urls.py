from django.urls import path

from . import views

app_name = "federation"

urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
    path("objects/new/", views.ObjectCreateView.as_view(), name="object-create"),
    path("objects/<int:pk>/", views.ObjectDetailView.as_view(), name="object-detail"),
    path("objects/<int:pk>/edit/", views.ObjectEditView.as_view(), name="object-edit"),
    path("objects/<int:pk>/rollout/", views.ObjectRolloutView.as_view(), name="object-rollout"),
    path("objects/<int:pk>/rollback/", views.ObjectRollbackView.as_view(), name="object-rollback"),
    path("objects/<int:pk>/reschedule/", views.ObjectRescheduleView.as_view(), name="object-reschedule"),
    path("objects/<int:pk>/delete/", views.ObjectDeleteView.as_view(), name="object-delete"),
    path("policies/", views.PolicyListView.as_view(), name="policy-list"),
    path("policies/<str:kind>/new/", views.PolicyCreateView.as_view(), name="policy-create"),
    path("policies/<str:kind>/<int:pk>/", views.PolicyDetailView.as_view(), name="policy-detail"),
    path("policies/<str:kind>/<int:pk>/delete/", views.PolicyDeleteView.as_view(), name="policy-delete"),
    path("water-levels/", views.WaterLevelsView.as_view(), name="water-levels"),
    path("water-levels.json", views.WaterLevelsJSONView.as_view(), name="water-levels-json"),
    path("clusters/<str:name>/cordon/", views.ClusterCordonView.as_view(), name="cluster-cordon"),
    path("what-if/", views.WhatIfView.as_view(), name="what-if"),
]

from django.urls import path

from . import views

app_name = "nodeconfig"

urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
    path("types/", views.ConfigTypeListView.as_view(), name="type-list"),
    path("targets/new/", views.TargetCreateView.as_view(), name="target-create"),
    path("targets/<int:pk>/", views.TargetDetailView.as_view(), name="target-detail"),
    path("targets/<int:pk>/edit/", views.TargetEditView.as_view(), name="target-edit"),
    path("targets/<int:pk>/rollback/", views.TargetRollbackView.as_view(), name="target-rollback"),
    path("targets/<int:pk>/delete/", views.TargetDeleteView.as_view(), name="target-delete"),
    path("targets/<int:pk>/rollout/", views.TargetRolloutView.as_view(), name="target-rollout"),
    path("targets/<int:pk>/restore/", views.EmergencyRestoreView.as_view(), name="emergency-restore"),
    path("import/", views.ImportView.as_view(), name="import"),
    path("emergency/", views.EmergencyView.as_view(), name="emergency"),
    path("nodes/<str:cluster>/<str:node>/", views.NodeConfigView.as_view(), name="node-config"),
]

from django.urls import path

from . import views

app_name = "quotas"

urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
    path("new/", views.GroupCreateView.as_view(), name="group-create"),
    path("check/", views.CheckView.as_view(), name="check"),
    path("webhook/", views.WebhookClustersView.as_view(), name="webhook-clusters"),
    path("webhook/<str:cluster>/", views.WebhookConfigurationPageView.as_view(), name="webhook-configuration"),
    path("groups/<str:name>/", views.GroupDetailView.as_view(), name="group-detail"),
    path("groups/<str:name>/resize/", views.GroupResizeView.as_view(), name="group-resize"),
    path("groups/<str:name>/owners/", views.GroupOwnersView.as_view(), name="group-owners"),
    path("groups/<str:name>/move/", views.GroupMoveView.as_view(), name="group-move"),
    path("groups/<str:name>/delete/", views.GroupDeleteView.as_view(), name="group-delete"),
]

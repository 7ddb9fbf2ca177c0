from django.urls import path

from . import views

app_name = "fleet"

urlpatterns = [
    path("", views.ClusterListView.as_view(), name="index"),
    path("clusters/<str:name>/", views.ClusterDetailView.as_view(), name="cluster-detail"),
    path("clusters/<str:name>/cordon/", views.ClusterCordonView.as_view(), name="cluster-cordon"),
    path("clusters/<str:cluster>/nodes/<str:name>/", views.NodeDetailView.as_view(), name="node-detail"),
]

from django.urls import path

from . import views

app_name = "administration"

urlpatterns = [
    path("", views.AdminIndexView.as_view(), name="index"),
    path("users/", views.UserListView.as_view(), name="user-list"),
    path("users/new/", views.UserCreateView.as_view(), name="user-create"),
    path("users/<int:pk>/", views.UserDetailView.as_view(), name="user-detail"),
    path("users/<int:pk>/change/", views.UserChangeView.as_view(), name="user-change"),
    path("users/<int:pk>/bindings/", views.RoleBindingGrantView.as_view(), name="rolebinding-grant"),
    path("role-bindings/", views.RoleBindingListView.as_view(), name="rolebinding-list"),
    path("role-bindings/<int:pk>/revoke/", views.RoleBindingRevokeView.as_view(), name="rolebinding-revoke"),
    path("tokens/", views.APITokenListView.as_view(), name="apitoken-list"),
    path("tokens/new/", views.APITokenIssueView.as_view(), name="apitoken-issue"),
    path("tokens/<int:pk>/revoke/", views.APITokenRevokeView.as_view(), name="apitoken-revoke"),
    path("clusters/", views.ClusterAdminListView.as_view(), name="cluster-list"),
    path("clusters/new/", views.ClusterRegisterView.as_view(), name="cluster-register"),
    path("clusters/<str:name>/", views.ClusterAdminView.as_view(), name="cluster-detail"),
    path("clusters/<str:name>/tokens/", views.ClusterTokenIssueView.as_view(), name="clustertoken-issue"),
    path("clusters/<str:name>/tokens/<int:pk>/revoke/", views.ClusterTokenRevokeView.as_view(), name="clustertoken-revoke"),
    path("clusters/<str:name>/webhooks.yaml", views.WebhookDownloadView.as_view(), name="cluster-webhooks"),
    path("config-types/", views.ConfigTypeListView.as_view(), name="configtype-list"),
    path("config-types/new/", views.ConfigTypeFormView.as_view(), name="configtype-create"),
    path("config-types/<str:name>/", views.ConfigTypeFormView.as_view(), name="configtype-edit"),
    path("quota-owners/", views.QuotaOwnerListView.as_view(), name="quota-owners"),
]

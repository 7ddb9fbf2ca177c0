"""Top-level URL map: pages per app, the versioned REST API, health and machine endpoints."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from core import health, sso_views
from core import views as core_views
from core.metrics import MetricsView
from nodeconfig import agent_views
from quotas import webhook as quota_webhook
from scheduling import webhook as scheduling_webhook

api_v1 = [
    path("", include("core.api.urls")),
    path("fleet/", include("fleet.api.urls")),
    path("nodeconfig/", include("nodeconfig.api.urls")),
    path("quotas/", include("quotas.api.urls")),
    path("federation/", include("federation.api.urls")),
    path("scheduling/", include("scheduling.api.urls")),
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", MetricsView.as_view(), name="metrics"),
    path("api/agent/v1/clusters/<str:cluster>/nodes/<str:node>/config", agent_views.node_config, name="agent-node-config"),
    path("api/agent/v1/clusters/<str:cluster>/nodes/<str:node>/status", agent_views.node_status, name="agent-node-status"),
    path("api/agent/v1/", include("scheduling.agent_urls")),
    path("api/admission/v1/quotas/validate", quota_webhook.validate, name="quotas-admission"),
    path("api/admission/v1/scheduling/mutate", scheduling_webhook.mutate, name="scheduling-admission"),
    path("accounts/login/", sso_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", sso_views.LogoutView.as_view(), name="logout"),
    path("accounts/oidc/login/", sso_views.sso_login, name="oidc-login"),
    path("accounts/oidc/callback/", sso_views.sso_callback, name="oidc-callback"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api/redoc/bundles/redoc.standalone.js", core_views.redoc_bundle, name="api-redoc-bundle"),
    path("fleet/", include("fleet.urls")),
    path("nodeconfig/", include("nodeconfig.urls")),
    path("quotas/", include("quotas.urls")),
    path("federation/", include("federation.urls")),
    path("scheduling/", include("scheduling.urls")),
    path("administration/", include("console.administration.urls")),
    path("", include("console.urls")),
]

if not settings.PRODUCTION:
    # Read-only (core.admin_site.ReadOnlyAdminSite); production never mounts it: every change goes
    # through the services and their audit entries, in the Administration section.
    urlpatterns.insert(-1, path("admin/", admin.site.urls))

handler400 = "core.views.bad_request"
handler403 = "core.views.permission_denied"
handler404 = "core.views.not_found"
handler500 = "core.views.server_error"

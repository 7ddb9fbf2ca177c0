from django.urls import path
from rest_framework.routers import SimpleRouter

from . import documents, views

app_name = "api"

router = SimpleRouter()
router.register("auth/tokens", views.APITokenViewSet, basename="apitoken")
router.register("core/jobs", views.JobViewSet)
router.register("core/audit-log", views.ObjectChangeViewSet)

urlpatterns = [
    path("", views.APIRootView.as_view(), name="root"),
    path("auth/token/", views.TokenObtainView.as_view(), name="token-obtain"),
    path("auth/me/", views.MeView.as_view(), name="me"),
    path("apply/", documents.ApplyView.as_view(), name="apply"),
    path("delete/", documents.DeleteView.as_view(), name="delete"),
    path("export/", documents.ExportView.as_view(), name="export"),
    *router.urls,
]

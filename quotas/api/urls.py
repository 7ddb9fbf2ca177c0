from django.urls import path
from rest_framework.routers import SimpleRouter

from . import views

app_name = "quotas-api"

router = SimpleRouter()
router.register("groups", views.QuotaGroupViewSet)
router.register("charges", views.ChargeViewSet)

urlpatterns = [
    path("webhook-configuration/<str:cluster>/", views.WebhookConfigurationView.as_view(), name="webhook-configuration"),
    *router.urls,
]

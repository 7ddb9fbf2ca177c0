from rest_framework.routers import SimpleRouter

app_name = "quotas-api"

router = SimpleRouter()

urlpatterns = [*router.urls]

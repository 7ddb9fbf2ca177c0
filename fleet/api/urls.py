from rest_framework.routers import SimpleRouter

app_name = "fleet-api"

router = SimpleRouter()

urlpatterns = [*router.urls]

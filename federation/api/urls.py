from rest_framework.routers import SimpleRouter

app_name = "federation-api"

router = SimpleRouter()

urlpatterns = [*router.urls]

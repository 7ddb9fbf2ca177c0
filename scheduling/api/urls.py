from rest_framework.routers import SimpleRouter

app_name = "scheduling-api"

router = SimpleRouter()

urlpatterns = [*router.urls]

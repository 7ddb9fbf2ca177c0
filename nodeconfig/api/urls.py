from rest_framework.routers import SimpleRouter

app_name = "nodeconfig-api"

router = SimpleRouter()

urlpatterns = [*router.urls]

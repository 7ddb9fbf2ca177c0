"""ASGI entry point: Django for HTTP (agent polls answered from Redis first, quota admission on a
thread pool of its own), Channels for ``/ws/``."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from django.conf import settings  # noqa: E402

from console.routing import websocket_urlpatterns  # noqa: E402
from nodeconfig.fastpath import AgentPollFastPath  # noqa: E402
from quotas.fastpath import AdmissionFastPath  # noqa: E402
from scheduling.fastpath import SchedulingWebhookFastPath  # noqa: E402
from core.authentication import WebsocketAuthMiddlewareStack  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": AdmissionFastPath(SchedulingWebhookFastPath(AgentPollFastPath(django_asgi_app, settings.REDIS_URL)), settings.MERIDIAN_WEBHOOK_THREADS),
        "websocket": AllowedHostsOriginValidator(WebsocketAuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

"""ASGI entry point: Django for HTTP, Channels for the ``/ws/`` websocket."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from console.routing import websocket_urlpatterns  # noqa: E402
from core.authentication import WebsocketAuthMiddlewareStack  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(WebsocketAuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

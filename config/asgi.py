"""ASGI entry point: Django for HTTP (agent polls answered from Redis first, quota admission on a
thread pool of its own), Channels for ``/ws/``."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
#: Celery's Django fixup runs Django's system checks when a process loads the tasks modules: a
#: worker's start, and a web process's first job sent, inside that request (0.3 s of 0.4 s).
#: The release's ``manage.py migrate`` runs them, and every pod's init container (``migrate
#: --check``): a web process has no use for them again.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

# What requests would load the first time they need it, loaded before the process serves any:
# the tasks modules (the first job sent, say the emergency downgrade's after a rolling restart)
# and the Kubernetes client (0.25 s, the first request that talks to a member cluster).
from core.jobs import load_task_modules  # noqa: E402

load_task_modules()
import fleet.connectors.kubernetes  # noqa: E402, F401

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

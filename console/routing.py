from django.urls import path

from .consumers import EventConsumer

websocket_urlpatterns = [path("ws/", EventConsumer.as_asgi())]

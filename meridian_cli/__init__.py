"""``meridian``: Meridian's command line. It speaks only the public REST API (``/api/v1/``) and
the websocket (``/ws/``), never Django or the apps' code (an import-linter contract holds it
to that), so it installs and runs on any machine that reaches a Meridian."""

__version__ = "0.1.0"

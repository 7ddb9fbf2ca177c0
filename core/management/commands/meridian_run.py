"""``make run``: the whole embedded product in one foreground command.

Starts the embedded Redis (unless REDIS_URL points elsewhere), migrates, creates the admin
user, seeds the demo fleet when the inventory is empty, then supervises the ASGI web
server, a Celery worker and Celery beat (``core.supervisor``: a process that exits is
started again with backoff and the restart printed; the others go on). Ctrl-C stops all
of them. Running it again reuses the database, the user and the fleet.
"""

from __future__ import annotations

import os
import signal
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from core.embedded_redis import EmbeddedRedis
from core.supervisor import Program, Supervisor


#: The area demos ``make run`` seeds after the fleet (each only into an empty inventory).
SEED_DEMOS = ("seed_nodeconfig_demo", "seed_quotas_demo", "seed_federation_demo", "seed_scheduling_demo")


class _Terminated:
    """SIGTERM while migrating or seeding (the supervisor handles signals only once it runs).

    The handler raises ``SystemExit`` so the command ends through its ``finally``, which stops
    the embedded Redis (Python's default ended the process at once and left the server running).
    That exception is lost when the signal lands inside a ``__del__`` (Python prints and ignores
    it; one CI run went on to migrate and supervise), so the command also checks between steps.
    """

    CODE = 128 + signal.SIGTERM

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: object) -> None:
        self.received = True
        raise SystemExit(self.CODE)

    def check(self) -> None:
        """Exit now if a SIGTERM came and its exception was swallowed."""
        if self.received:
            raise SystemExit(self.CODE)


class Command(BaseCommand):
    help = "Start Meridian (web, worker, beat; embedded Redis and SQLite unless configured otherwise)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-seed", action="store_true", help="do not seed the demo fleet")
        parser.add_argument("--demo-nodes", type=int, default=os.environ.get("MERIDIAN_DEMO_NODES", "2000"),
                            help="nodes in the demo fleet, when it is seeded (default 2,000)")

    def handle(self, *args, **options) -> None:
        stop = _Terminated()
        signal.signal(signal.SIGTERM, stop)
        redis_server = None
        env = dict(os.environ)
        try:
            if not os.environ.get("REDIS_URL"):
                redis_server = EmbeddedRedis(settings.EMBEDDED_REDIS_SOCKET, log_path=settings.VAR_DIR / "redis.log").start()
                env["REDIS_URL"] = redis_server.url
                self.stdout.write(f"embedded Redis on {redis_server.url}")
                self.stdout.flush()
            call_command("migrate", interactive=False, verbosity=0)
            stop.check()
            self.stdout.write("database migrated")
            steps: list[tuple[str, dict]] = [("bootstrap_admin", {})]
            if not options["no_seed"]:
                steps.append(("seed_demo", {"if_empty": True, "nodes": options["demo_nodes"]}))
                steps += [(name, {"if_empty": True}) for name in SEED_DEMOS]
            for name, kwargs in steps:
                call_command(name, **kwargs)
                stop.check()
            self.stdout.write(self.style.SUCCESS(f"Meridian: http://{options['host']}:{options['port']}/  (Ctrl-C stops)"))
            sys.stdout.flush()
            code = self._supervise(env, options["host"], options["port"])
        finally:
            if redis_server is not None:
                redis_server.stop()
        sys.exit(code)

    def _supervise(self, env: dict, host: str, port: int) -> int:
        python = sys.executable
        programs = [  # live events go uncompressed, as deploy/ runs the web (UVICORN_WS_PER_MESSAGE_DEFLATE)
            Program("web", [python, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", str(port),
                            "--lifespan", "off", "--no-access-log", "--ws-per-message-deflate", "false"], env=env),
            Program("worker", [python, "manage.py", "meridian_worker"], env=env),
            Program("beat", [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"], env=env),
        ]
        return Supervisor(programs, out=sys.stdout).run()

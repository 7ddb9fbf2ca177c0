"""Run a Celery worker consuming the default queue and a chosen set of reconcile shards, and
keep it running: a worker that exits on its own (Celery's "Unrecoverable error" after a
broker fault, a crash, a kill -9) is started again within seconds (``core.supervisor``).
SIGTERM is passed on (Celery's warm shutdown: running tasks finish); this command exits
when the worker has."""

from __future__ import annotations

import os
import socket
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.sharding import SHARD_QUEUE_PREFIX, parse_shard_spec
from core.supervisor import Program, Supervisor


#: The longest wait before starting a worker that keeps exiting again.
RESTART_MAX_SECONDS = 4.0


class Command(BaseCommand):
    help = "Run a Celery worker; --shards picks which reconcile.<n> queues it owns (default: all)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--shards", default="all", help="'all' or a list such as 0,2-3")
        parser.add_argument("--no-default-queue", action="store_true", help="consume only the shard queues")
        parser.add_argument("--concurrency", type=int, default=int(os.environ.get("MERIDIAN_WORKER_CONCURRENCY", "2")))
        parser.add_argument("--name", default="",
                            help="worker node name (default meridian-<pid>-<start>@<host>, a new one at each restart)")
        parser.add_argument("--loglevel", default="INFO")

    def handle(self, *args, **options) -> None:
        try:
            shards = parse_shard_spec(options["shards"], settings.MERIDIAN_SHARDS)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        queues = [f"{SHARD_QUEUE_PREFIX}{n}" for n in shards]
        if not options["no_default_queue"]:
            queues.insert(0, settings.CELERY_TASK_DEFAULT_QUEUE)
        name = options["name"] or f"meridian-{os.getpid()}-{{start}}@{socket.gethostname()}"
        argv = [
            sys.executable, "-m", "celery", "-A", "config", "worker",
            "-Q", ",".join(queues), "-n", name,
            "--concurrency", str(options["concurrency"]), "--loglevel", options["loglevel"],
            "--without-gossip", "--without-mingle",
        ]
        self.stdout.write(f"worker {name} consuming {', '.join(queues)}")
        sys.stdout.flush()
        env = {**os.environ, "MERIDIAN_WORKER_NODE": name}  # lets the job reaper tell a dead pool process on this node
        # No deadline of its own on SIGTERM: whoever stops it (systemd, Kubernetes) sets the grace
        # period. A short backoff: a worker that died of a broker fault is wanted back within
        # seconds (each start takes a few of its own), however often the broker flapped.
        code = Supervisor([Program("worker", argv, env=env)], prefix_output=False, stop_timeout=None,
                          max_backoff=RESTART_MAX_SECONDS, stable_after=10).run()
        sys.exit(code)

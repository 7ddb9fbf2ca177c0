"""``manage.py meridian_backup [--output PATH]``: a consistent snapshot of the whole database in one file."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from core.backup import BackupError, create_backup, default_filename, describe_target, human_size


class Command(BaseCommand):
    help = ("Back up the whole database into one file (pg_dump -Fc on PostgreSQL, the online backup API on SQLite) "
            "while Meridian keeps running. Kubeconfigs stay encrypted: keep MERIDIAN_ENCRYPTION_KEYS / SECRET_KEY "
            "separately. See docs/backup.md.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", "-o", default="",
                            help="file to write, or a directory for the default name "
                                 "(meridian-backup-<vendor>-<UTC time>.tar in the current directory)")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="the database alias (default: default)")

    def handle(self, *args, **options) -> None:
        connection = connections[options["database"]]
        output = Path(options["output"]) if options["output"] else Path.cwd()
        if output.is_dir():
            output = output / default_filename(connection.vendor)
        output = output.absolute()
        started = time.monotonic()
        self.stdout.write(f"backing up the {describe_target(connection)} to {output}")
        try:
            manifest = create_backup(connection, output, log=self.stdout.write)
        except BackupError as exc:
            raise CommandError(f"backup failed, nothing written: {exc}") from exc
        except OSError as exc:
            raise CommandError(f"backup failed, nothing written: {exc}") from exc
        size = output.stat().st_size
        latest = ", ".join(f"{app} {name}" for app, name in manifest["migrations"]["latest"].items())
        self.stdout.write(f"schema: {latest}")
        self.stdout.write(self.style.SUCCESS(
            f"wrote {output} ({human_size(size)}) in {time.monotonic() - started:.1f} s; "
            f"payload SHA-256 {manifest['payload']['sha256']}"))

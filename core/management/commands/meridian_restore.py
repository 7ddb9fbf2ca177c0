"""``manage.py meridian_restore PATH [--yes]``: replace the whole database with a backup's."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from redis.exceptions import RedisError

from core.backup import (VENDOR_NAMES, BackupError, check_schema, close_connections, database_restored, describe_target,
                         human_size, open_backup, restore_postgresql, restore_sqlite, undecryptable_secrets)
from core.fields import configured_keys, key_fingerprint
from core.redis import get_redis


class Command(BaseCommand):
    help = ("Restore a backup written by meridian_backup: verify it, then replace the whole database at once "
            "(PostgreSQL: one transaction; SQLite: an atomic rename) and migrate it if it is older than the code. "
            "Stop Meridian (web, workers, beat) first. See docs/backup.md.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="the backup file")
        parser.add_argument("--yes", action="store_true",
                            help="do not ask for confirmation (required when there is no terminal to ask on)")
        parser.add_argument("--allow-connections", action="store_true",
                            help="PostgreSQL: restore even though other sessions are connected to the database "
                                 "(none is terminated; the restore waits for their locks)")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="the database alias (default: default)")

    def handle(self, *args, **options) -> None:
        connection = connections[options["database"]]
        path = Path(options["path"]).absolute()
        started = time.monotonic()
        try:
            backup = open_backup(path)
        except BackupError as exc:
            raise CommandError(f"refusing to restore: {exc}") from exc
        try:
            self._restore(connection, backup, options, started)
        finally:
            backup.close()

    def _restore(self, connection, backup, options, started: float) -> None:
        manifest = backup.manifest
        vendor = manifest.get("vendor")
        if vendor != connection.vendor:
            raise CommandError(
                f"refusing to restore: {backup.path} is a backup of a {VENDOR_NAMES.get(vendor, vendor)} database and "
                f"this Meridian uses {VENDOR_NAMES.get(connection.vendor, connection.vendor)}; a backup restores only "
                f"into the vendor it was taken from")
        schema = check_schema(manifest)
        if schema.newer:
            raise CommandError(
                f"refusing to restore: the backup's schema is newer than this code: it has migrations this Meridian "
                f"does not know ({', '.join(schema.unknown)}). Restore it with the Meridian version that made it "
                f"(or a newer one)")
        self.stdout.write(f"backup {backup.path}: {VENDOR_NAMES.get(vendor, vendor)}, made {manifest['created']}, "
                          f"payload {human_size(manifest['payload']['size'])}, checksums verified")
        self.stdout.write("backup schema: " + ", ".join(f"{a} {n}" for a, n in manifest["migrations"]["latest"].items()))
        if schema.older:
            self.stdout.write(f"the backup's schema is older than this code: {len(schema.pending)} migration(s) will "
                              f"be applied after restoring ({', '.join(schema.pending)})")
        self._warn_about_keys(manifest)
        target = describe_target(connection)
        self.stdout.write(self.style.WARNING(
            f"this replaces EVERYTHING in the {target} with the backup's contents. Meridian (web server, workers, "
            f"beat) must be stopped."))
        self._confirm(options["yes"])

        try:
            if connection.vendor == "postgresql":
                restore_postgresql(connection, backup, allow_connections=options["allow_connections"],
                                   log=self.stdout.write)
            else:
                restore_sqlite(connection, backup, log=self.stdout.write)
        except BackupError as exc:
            raise CommandError(f"restore failed: {exc}") from exc
        except OSError as exc:
            raise CommandError(f"restore failed: {exc}") from exc
        finally:
            close_connections()
        self.stdout.write(f"restored the {target} from {backup.path}")

        if schema.older:
            self.stdout.write(f"migrating the restored database ({len(schema.pending)} migration(s) newer than the backup)")
            call_command("migrate", interactive=False, verbosity=options["verbosity"], stdout=self.stdout,
                         database=options["database"])
        bad = undecryptable_secrets(connection)
        for label, count in bad.items():
            self.stderr.write(self.style.ERROR(
                f"{count} {label} value(s) cannot be decrypted with the configured MERIDIAN_ENCRYPTION_KEYS / "
                f"SECRET_KEY: add the key(s) in use when the backup was made (kept as they are meanwhile)"))
        self._drop_caches(options["database"])
        close_connections()
        self.stdout.write(self.style.SUCCESS(f"restore complete in {time.monotonic() - started:.1f} s; start Meridian again"))

    def _drop_caches(self, using: str) -> None:
        """Redis keeps caches derived from the replaced database (agent ETags, token lookups,
        cpuset bodies): the apps drop them. Redis itself holds nothing to restore."""
        try:
            get_redis().ping()
        except (RedisError, OSError) as exc:
            self.stdout.write(
                f"Redis is not reachable ({exc}): nothing cached was dropped. A Redis that is stopped starts "
                f"empty when it has no persistence (the embedded one never has); otherwise delete the keys "
                f"meridian:nodeconfig:etag:*, meridian:fleet:token:* and meridian:scheduling:* before starting Meridian")
            return
        failed = 0
        for receiver, result in database_restored.send_robust(sender=self.__class__, using=using):
            if isinstance(result, Exception):
                failed += 1
                self.stderr.write(self.style.WARNING(
                    f"could not drop a cache of the replaced database ({getattr(receiver, '__qualname__', receiver)}): "
                    f"{result}"))
        if not failed:
            self.stdout.write("dropped the Redis caches of the replaced database (agent ETags, token lookups, cpuset bodies)")

    def _warn_about_keys(self, manifest: dict) -> None:
        current = {key_fingerprint(k) for k in configured_keys()}
        needed = (manifest.get("encryption") or {}).get("values_by_key", {})
        missing = {fp: n for fp, n in needed.items() if fp not in current and fp not in ("plaintext", "unknown")}
        if needed.get("unknown"):
            self.stderr.write(self.style.WARNING(
                f"{needed['unknown']} secret(s) in the backup were already unreadable when it was made (no key "
                f"configured then opened them)"))
        if missing:
            self.stderr.write(self.style.WARNING(
                "some secrets in the backup are encrypted with keys that are not configured here ("
                + ", ".join(f"{n} under key {fp}" for fp, n in sorted(missing.items()))
                + "): they will not decrypt until MERIDIAN_ENCRYPTION_KEYS includes those keys"))

    def _confirm(self, yes: bool) -> None:
        if yes:
            return
        if not sys.stdin.isatty():
            raise CommandError("refusing to restore without --yes: there is no terminal to confirm on; nothing changed")
        answer = input("Type 'yes' to restore, or anything else to cancel: ")
        if answer.strip() != "yes":
            raise CommandError("restore cancelled; nothing changed")

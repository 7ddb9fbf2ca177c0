"""``manage.py meridian_rotate_keys``: re-encrypt every stored secret with the first encryption key."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.fields import configured_keys, key_fingerprint
from core.keyrotation import CHANGED, CURRENT, ENCRYPTED, ROTATED, UNDECRYPTABLE, rotate


class Command(BaseCommand):
    help = ("Re-encrypt every encrypted value (kubeconfigs) with the first of MERIDIAN_ENCRYPTION_KEYS, in batches. "
            "Run after prepending a new key; see docs/backup.md before dropping an old key.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--batch-size", type=int, default=500, help="rows per transaction (default 500)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be re-encrypted; write nothing")

    def handle(self, *args, **options) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        keys = configured_keys()
        self.stdout.write(f"encrypting key: {key_fingerprint(keys[0])}; "
                          f"decrypting keys: {', '.join(key_fingerprint(k) for k in keys)}"
                          + ("" if len(keys) > 1 else " (only one key configured: nothing can be under another)"))
        report = rotate(batch_size=options["batch_size"], dry_run=options["dry_run"])
        verb = "would re-encrypt" if options["dry_run"] else "re-encrypted"
        total_bad = 0
        for label, counts in report.items():
            total = sum(counts.values())
            total_bad += counts[UNDECRYPTABLE]
            self.stdout.write(
                f"{label}: {total} value(s): {counts[ROTATED]} {verb} from an older key, {counts[ENCRYPTED]} stored "
                f"unencrypted {'would be ' if options['dry_run'] else ''}encrypted, {counts[CURRENT]} already under "
                f"the first key, {counts[CHANGED]} rewritten by someone else meanwhile, "
                f"{counts[UNDECRYPTABLE]} no configured key opens")
        if total_bad:
            raise CommandError(f"{total_bad} value(s) no configured key opens were left as they are: some key they "
                               f"were written with is missing from MERIDIAN_ENCRYPTION_KEYS. Do not drop any key; "
                               f"add the missing one and run this again")
        if options["dry_run"]:
            self.stdout.write("dry run: nothing was written")
        else:
            self.stdout.write(self.style.SUCCESS(
                "every stored secret is under the first key. Keys after the first may be removed from "
                "MERIDIAN_ENCRYPTION_KEYS once every backup made before now has expired (docs/backup.md)."))

"""Create the first admin user once; later runs leave existing users alone."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from core.roles import ADMIN


class Command(BaseCommand):
    help = "Create the admin user from MERIDIAN_ADMIN_USERNAME / MERIDIAN_ADMIN_PASSWORD (or admin + a random password)."

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        username = os.environ.get("MERIDIAN_ADMIN_USERNAME") or "admin"
        password = os.environ.get("MERIDIAN_ADMIN_PASSWORD") or ""
        with transaction.atomic():
            user = User.objects.filter(username=username).first()
            if user is not None:
                if password and not user.check_password(password):
                    user.set_password(password)
                    user.save(update_fields=["password"])
                    self.stdout.write(f"admin user '{username}': password updated from MERIDIAN_ADMIN_PASSWORD")
                else:
                    self.stdout.write(f"admin user '{username}' already exists")
                return
            generated = not password
            password = password or secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
            user.groups.add(Group.objects.get(name=ADMIN))
        if generated:
            banner = f"admin user created: username '{username}', password '{password}' (shown once)"
            self.stdout.write(self.style.WARNING("=" * len(banner)))
            self.stdout.write(self.style.WARNING(banner))
            self.stdout.write(self.style.WARNING("=" * len(banner)))
        else:
            self.stdout.write(f"admin user '{username}' created from MERIDIAN_ADMIN_PASSWORD")

"""Kubeconfigs are encrypted at rest; the keys rotate; an unreadable one is never used or lost."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings

from core import fields
from fleet.connectors.base import ConnectorError
from fleet.models import Cluster
from fleet.services import connector_for

KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {token: s3cret-bearer-token}\n"


def stored(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials FROM fleet_cluster WHERE id = %s", [pk])
        return cursor.fetchone()[0]


@pytest.fixture(autouse=True)
def _fresh_cipher():
    fields._cipher.cache_clear()
    yield
    fields._cipher.cache_clear()


@pytest.mark.django_db
def test_the_database_holds_ciphertext_and_the_model_plaintext():
    cluster = Cluster.objects.create(name="enc-1", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    raw = stored(cluster.pk)
    assert raw.startswith(fields.PREFIX) and "s3cret" not in raw and "apiVersion" not in raw
    assert Cluster.objects.get(pk=cluster.pk).credentials == KUBECONFIG


@pytest.mark.django_db
def test_keys_rotate_by_prepending_a_new_one(settings):
    settings.MERIDIAN_ENCRYPTION_KEYS = ["old-key-" + "x" * 40]
    cluster = Cluster.objects.create(name="enc-2", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    old_cipher = stored(cluster.pk)
    settings.MERIDIAN_ENCRYPTION_KEYS = ["new-key-" + "y" * 40, "old-key-" + "x" * 40]
    reread = Cluster.objects.get(pk=cluster.pk)
    assert reread.credentials == KUBECONFIG, "old ciphertext still opens"
    reread.credentials = KUBECONFIG + "# re-saved\n"
    reread.save()
    settings.MERIDIAN_ENCRYPTION_KEYS = ["new-key-" + "y" * 40]
    assert Cluster.objects.get(pk=cluster.pk).credentials.endswith("# re-saved\n")
    assert stored(cluster.pk) != old_cipher


@pytest.mark.django_db
def test_a_kubeconfig_no_key_opens_is_refused_and_kept(settings):
    settings.MERIDIAN_ENCRYPTION_KEYS = ["first-key-" + "a" * 40]
    cluster = Cluster.objects.create(name="enc-3", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    ciphertext = stored(cluster.pk)
    with override_settings(MERIDIAN_ENCRYPTION_KEYS=["other-key-" + "b" * 40]):
        fields._cipher.cache_clear()
        unreadable = Cluster.objects.get(pk=cluster.pk)
        assert unreadable.credentials == ""
        with pytest.raises(ConnectorError) as refused:
            connector_for(unreadable)
        assert refused.value.reason == "config" and "decrypted" in str(refused.value)
        unreadable.display_name = "renamed"
        unreadable.save()
    assert stored(cluster.pk) == ciphertext, "saving the row must not wipe the secret"

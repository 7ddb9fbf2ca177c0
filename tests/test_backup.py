"""Backups and restores through the commands, on whichever database the session uses (SQLite
or PostgreSQL), and key rotation.

Restoring replaces the test database itself: those tests are ``transaction=True`` (nothing
of the test is left in an open transaction, pytest-django flushes the tables afterwards) and
the command closes this process's connections and pool before it restores, as it does in
production. Restoring into the very database the suite uses is the real thing the command
does (the configured database, its own connection settings) rather than a second alias the
product never has; nothing else connects to the test database while these tests run.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from core import backup as backup_module
from core import fields
from core.models import APIToken, Job, ObjectChange
from core.redis import get_redis
from core.roles import OPERATOR
from fleet.models import Cluster, ClusterToken, Node
from fleet.tokens import issue_token
from nodeconfig.etags import etag_key
from nodeconfig.models import ConfigRevision, ConfigType
from nodeconfig.services import TargetSpec, save_target
from quotas import services as quotas
from quotas.models import QuotaGroup
from scheduling.cpu.agent import AGENT_BODY_KEY

ROOT = Path(__file__).resolve().parent.parent
SECRET_TOKEN = "kubeconfig-plaintext-sentinel-8d1f0c"
KUBECONFIG = f"apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {{token: {SECRET_TOKEN}}}\n"
OLD_KEY, NEW_KEY = "old-key-" + "o" * 40, "new-key-" + "n" * 40


@pytest.fixture(autouse=True)
def _fresh_cipher():
    fields._cipher.cache_clear()
    yield
    fields._cipher.cache_clear()


def stored(pk: int) -> str:
    """A cluster's credentials as the database holds them (ciphertext)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials FROM fleet_cluster WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def every_row() -> dict[str, list[dict]]:
    """Every row of every table Django knows (many-to-many tables too), ordered by primary key."""
    return {model._meta.label: list(model._base_manager.order_by("pk").values())
            for model in apps.get_models(include_auto_created=True)
            if model._meta.managed and not model._meta.proxy}


def backup(tmp_path: Path, name: str = "meridian.tar") -> tuple[Path, str]:
    out = io.StringIO()
    call_command("meridian_backup", output=str(tmp_path / name), stdout=out)
    return tmp_path / name, out.getvalue()


def restore(path: Path, **options) -> str:
    _close_other_connections()
    out = io.StringIO()
    call_command("meridian_restore", str(path), stdout=out, stderr=out, **options)
    return out.getvalue()


def _close_other_connections() -> None:
    """The suite's own leftovers on SQLite (on PostgreSQL the restore ends its own process's
    sessions itself): asgiref's one thread for sync_to_async keeps the connection an earlier
    async test opened there, and threads that ended keep theirs until collected. A restore
    needs the database to itself (as when Meridian is stopped)."""
    import gc

    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)
    gc.collect()


def other_process_session(application_name: str, *, linger: float = 0.0) -> subprocess.Popen:
    """Another process holding an idle session on the test database (as a web process would),
    until its stdin closes and ``linger`` seconds more."""
    conninfo, env, _ = backup_module.libpq_connection(connection)
    code = ("import psycopg, sys, time; c = psycopg.connect(sys.argv[1], application_name=sys.argv[2]); "
            "c.execute('SELECT 1'); c.commit(); print('ready', flush=True); sys.stdin.read(); "
            "time.sleep(float(sys.argv[3]))")
    process = subprocess.Popen([sys.executable, "-c", code, conninfo, application_name, str(linger)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    assert process.stdout.readline().strip() == "ready"
    return process


def rewritten(path: Path, new: Path, change=lambda manifest: None, payload_change=lambda payload: payload) -> Path:
    """A well-formed backup (fresh checksums) whose manifest ``change(manifest)`` edited, or
    whose payload ``payload_change`` replaced (as a broken tool would have written it)."""
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile(backup_module.MANIFEST).read())
        payload_name = manifest["payload"]["name"]
        payload = payload_change(tar.extractfile(payload_name).read())
    change(manifest)

    def manifest_for(size: int, sha: str) -> dict:
        manifest["payload"].update(size=size, sha256=sha)
        return manifest

    backup_module.write_archive(new, payload_name, [payload], manifest_for)
    return new


def payload_offset(path: Path, member: str) -> tuple[int, int]:
    with tarfile.open(path) as tar:
        info = tar.getmember(member)
        return info.offset_data, info.size


@pytest.fixture
def populated(django_user_model, purge_shard_queues):
    """Rows across the apps: users and tokens, a cluster with a kubeconfig, nodes, cluster
    tokens, a node-config target with revisions, a quota tree, and the audit entries and jobs
    their services wrote."""
    ops = django_user_model.objects.create_user(username="bk-operator", password="x-" * 10)
    ops.groups.add(Group.objects.get(name=OPERATOR))
    django_user_model.objects.create_user(username="bk-leaver", password="y-" * 10)
    APIToken.issue(ops, name="automation")
    secret = Cluster.objects.create(name="bk-secret", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    sim = Cluster.objects.create(name="bk-sim", connector="simulated", connector_config={"node_count": 3, "seed": 1})
    Node.objects.bulk_create(Node(cluster=sim, name=f"bk-sim-n{i}", labels={"pool": "online"}, ready=True)
                             for i in range(3))
    issue_token(sim, "agent", name="agents")
    admin_qos = ConfigType.objects.get(name="AdminQoSConfiguration")
    spec = TargetSpec(name="bk-target", cluster="bk-sim", node_label_selector="pool=online", priority=1,
                      config={"reclaimedResourceConfig": {"enableReclaim": True}})
    save_target(admin_qos, spec, reason="first")
    spec.config = {"reclaimedResourceConfig": {"enableReclaim": False}}
    save_target(admin_qos, spec, reason="second")
    quotas.create_group(name="bk-root", parent=None, hard={"cpu": "100", "memory": "200Gi"}, reason="tree")
    quotas.create_group(name="bk-child", parent="bk-root", hard={"cpu": "10", "memory": "20Gi"}, reason="tree")
    assert ConfigRevision.objects.filter(target__name="bk-target").count() == 2
    assert ObjectChange.objects.exists() and Job.objects.exists()
    return {"secret": secret, "sim": sim, "spec": spec, "admin_qos": admin_qos}


# ---------------------------------------------------------------------------- round trip


@pytest.mark.django_db(transaction=True)
def test_a_restore_brings_back_every_row_of_every_table(populated, tmp_path, django_user_model):
    before = every_row()
    ciphertext = stored(populated["secret"].pk)
    path, said = backup(tmp_path)
    assert f"wrote {path}" in said and " in " in said
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no temporary file is left beside it"

    # Everything changes afterwards: deletions, updates, new rows in the same tables.
    Cluster.objects.filter(name="bk-secret").delete()
    Cluster.objects.filter(name="bk-sim").update(display_name="renamed", labels={"after": "backup"})
    django_user_model.objects.filter(username="bk-leaver").delete()
    APIToken.objects.all().delete()
    ClusterToken.objects.all().delete()
    populated["spec"].config = {"reclaimedResourceConfig": {"enableReclaim": True}}
    save_target(populated["admin_qos"], populated["spec"], reason="third")
    quotas.update_group(QuotaGroup.objects.get(name="bk-child"), hard={"cpu": "20", "memory": "20Gi"}, reason="grow")
    Cluster.objects.create(name="bk-new", connector="simulated")
    Job.objects.create(kind="after-backup", triggered_by="test")
    redis = get_redis()
    redis.set(etag_key("bk-sim", "bk-sim-n0"), "etag-of-a-config-made-after-the-backup")
    cpuset_body = AGENT_BODY_KEY.format(etag='"cpu-of-a-version-the-restore-rewinds"')
    redis.set(cpuset_body, b"{}")
    assert every_row() != before

    said = restore(path, yes=True)

    assert "checksums verified" in said and "restore complete" in said
    after = every_row()
    assert after.keys() == before.keys()
    for label in before:
        assert after[label] == before[label], f"{label} differs after the restore"
    assert stored(populated["secret"].pk) == ciphertext, "a raw copy: the same ciphertext comes back"
    assert Cluster.objects.get(name="bk-secret").credentials == KUBECONFIG
    assert redis.get(etag_key("bk-sim", "bk-sim-n0")) is None, "ETags of the replaced database are dropped"
    assert redis.get(cpuset_body) is None, "and cpuset bodies cached by a version number that rewound"


@pytest.mark.django_db(transaction=True)
def test_an_older_backup_is_restored_then_migrated(tmp_path, purge_shard_queues):
    from federation.models import WaterLevelRollup

    call_command("migrate", "federation", "0003", verbosity=0)
    try:
        Cluster.objects.create(name="bk-old", connector="simulated")
        path, said = backup(tmp_path)
        assert "federation 0003_consolidation" in said
    finally:
        call_command("migrate", "federation", verbosity=0)
    # A table the backup does not have, pointing at one it does: pg_restore --clean alone
    # could not drop fleet_cluster under its foreign key.
    cluster = Cluster.objects.create(name="bk-newer", connector="simulated")
    WaterLevelRollup.objects.create(cluster=cluster, grain="hour", at="2026-01-01T00:00:00Z")

    said = restore(path, yes=True)

    assert "older than this code" in said and "federation.0004_water_level_rollups" in said
    assert "migrating the restored database" in said
    if connection.vendor == "postgresql":
        assert "dropping 1 table(s) newer than the backup, in the same transaction: federation_waterlevelrollup" in said
    assert list(Cluster.objects.values_list("name", flat=True)) == ["bk-old"]
    assert WaterLevelRollup.objects.count() == 0, "the newer table is back, as migrate creates it"
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM django_migrations WHERE app = 'federation' ORDER BY name")
        leaves = {app: name for app, name in MigrationLoader(connection).graph.leaf_nodes()}
        assert cursor.fetchall()[-1] == (leaves["federation"],), "migrated to this code's latest"


@pytest.mark.django_db(transaction=True)
def test_a_backup_restored_where_its_key_is_missing_says_so_and_keeps_the_ciphertext(tmp_path, settings):
    settings.MERIDIAN_ENCRYPTION_KEYS = [OLD_KEY]
    cluster = Cluster.objects.create(name="bk-moved", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    ciphertext = stored(cluster.pk)
    path, _ = backup(tmp_path)

    settings.MERIDIAN_ENCRYPTION_KEYS = [NEW_KEY]  # another installation, other keys
    said = restore(path, yes=True)

    assert f"1 under key {fields.key_fingerprint(OLD_KEY)}" in said, "warned before restoring"
    assert "1 fleet.Cluster.credentials value(s) cannot be decrypted" in said, "and counted after"
    assert stored(cluster.pk) == ciphertext and Cluster.objects.get(pk=cluster.pk).credentials == ""
    settings.MERIDIAN_ENCRYPTION_KEYS = [NEW_KEY, OLD_KEY]  # the backup's key added: it opens again
    assert Cluster.objects.get(pk=cluster.pk).credentials == KUBECONFIG


# ---------------------------------------------------------------------------- refusals


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["payload", "manifest"])
def test_a_corrupted_backup_is_refused_and_nothing_changes(tmp_path, where):
    Cluster.objects.create(name="bk-before", connector="simulated")
    path, _ = backup(tmp_path)
    Cluster.objects.create(name="bk-after", connector="simulated")
    before = every_row()
    member = backup_module.MANIFEST if where == "manifest" else json.loads(
        tarfile.open(path).extractfile(backup_module.MANIFEST).read())["payload"]["name"]
    offset, size = payload_offset(path, member)
    data = bytearray(path.read_bytes())
    data[offset + size // 2] ^= 0x01
    path.write_bytes(bytes(data))

    with pytest.raises(CommandError, match="damaged") as refused:
        restore(path, yes=True)

    assert "refusing to restore" in str(refused.value)
    assert every_row() == before


@pytest.mark.django_db(transaction=True)
def test_a_restore_that_fails_midway_changes_nothing(tmp_path):
    """A payload that passes its checksums yet breaks partway (a broken tool wrote it):
    PostgreSQL has run the drops and the first tables' data when pg_restore fails, and rolls
    all of it back; SQLite's copy fails its check before the rename."""
    Cluster.objects.create(name="bk-before", connector="simulated")
    path, _ = backup(tmp_path)
    broken = rewritten(path, tmp_path / "broken.tar", payload_change=lambda payload: payload[: len(payload) * 4 // 5])
    Cluster.objects.create(name="bk-after", connector="simulated")
    before = every_row()

    with pytest.raises(CommandError, match="nothing changed") as failed:
        restore(broken, yes=True)

    assert ("pg_restore failed" if connection.vendor == "postgresql" else "quick_check") in str(failed.value)
    assert every_row() == before


@pytest.mark.django_db
def test_a_backup_of_another_vendor_is_refused(tmp_path):
    path, _ = backup(tmp_path)
    other = "sqlite" if connection.vendor == "postgresql" else "postgresql"
    forged = rewritten(path, tmp_path / "other.tar", lambda manifest: manifest.update(vendor=other))
    before = every_row()

    with pytest.raises(CommandError, match="a backup restores only into the vendor it was taken from") as refused:
        restore(forged, yes=True)

    assert backup_module.VENDOR_NAMES[other] in str(refused.value)
    assert every_row() == before


@pytest.mark.django_db
def test_a_backup_from_a_newer_schema_is_refused(tmp_path):
    path, _ = backup(tmp_path)
    newer = rewritten(path, tmp_path / "newer.tar",
                      lambda manifest: manifest["migrations"]["applied"]["core"].append("9999_from_the_future"))

    with pytest.raises(CommandError, match="newer than this code") as refused:
        restore(newer, yes=True)

    assert "core.9999_from_the_future" in str(refused.value)


@pytest.mark.django_db
def test_a_restore_without_yes_and_without_a_terminal_is_refused(tmp_path):
    path, _ = backup(tmp_path)
    env = {**os.environ}
    if connection.vendor == "sqlite":  # the subprocess would otherwise look at the (absent) main database
        env["MERIDIAN_VAR_DIR"] = str(tmp_path)
    result = subprocess.run([sys.executable, "manage.py", "meridian_restore", str(path)], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "refusing to restore without --yes" in result.stderr
    assert "checksums verified" in result.stdout, "it checked the backup before asking"


@pytest.mark.django_db(transaction=True)
def test_a_restore_refuses_while_another_process_uses_the_database(tmp_path):
    path, _ = backup(tmp_path)
    Cluster.objects.create(name="bk-after", connector="simulated")
    if connection.vendor == "sqlite":
        other = sqlite3.connect(connection.settings_dict["NAME"])
        other.execute("SELECT count(*) FROM fleet_cluster").fetchall()
        expected = "in use by another process"
    else:
        other = other_process_session("bk-other-process")
        expected = "bk-other-process"
    try:
        with pytest.raises(CommandError, match="nothing (was terminated or )?changed") as refused:
            restore(path, yes=True)
    finally:
        if connection.vendor == "sqlite":
            other.close()
        else:
            other.communicate("", timeout=30)
    assert expected in str(refused.value)
    assert Cluster.objects.filter(name="bk-after").exists()


@pytest.mark.django_db(transaction=True)
def test_a_session_that_ends_while_the_restore_looks_is_not_in_its_way(tmp_path):
    """A session whose client has gone is listed until its server process ends (CI saw the
    restore refuse for one, under load): the restore waits a moment for the ones it found."""
    if connection.vendor != "postgresql":
        pytest.skip("sessions are PostgreSQL's")
    path, _ = backup(tmp_path)
    Cluster.objects.create(name="bk-after", connector="simulated")
    leaving = other_process_session("bk-leaving", linger=1.5)

    class Output(io.StringIO):
        def write(self, text: str) -> int:
            if "checksums verified" in text and not leaving.stdin.closed:
                leaving.stdin.close()  # it ends its session 1.5 s from now, while the restore looks
            return super().write(text)

    _close_other_connections()
    out = Output()
    try:
        call_command("meridian_restore", str(path), yes=True, stdout=out, stderr=out)
    finally:
        leaving.wait(timeout=30)
    assert "checksums verified" in out.getvalue()
    assert not Cluster.objects.filter(name="bk-after").exists(), "restored"


@pytest.mark.django_db(transaction=True)
def test_a_restore_ends_the_idle_sessions_of_its_own_process(tmp_path):
    """Other threads of the restoring process (a server's, a watcher's) are not another
    Meridian: their sessions are ended instead of refusing the restore."""
    if connection.vendor != "postgresql":
        pytest.skip("sessions are PostgreSQL's")
    import threading

    import psycopg

    path, _ = backup(tmp_path)
    Cluster.objects.create(name="bk-after", connector="simulated")
    conninfo, env, _ = backup_module.libpq_connection(connection)
    held: list[psycopg.Connection] = []
    opener = threading.Thread(target=lambda: held.append(
        psycopg.connect(conninfo, password=env.get("PGPASSWORD"), autocommit=True)))
    opener.start()
    opener.join()

    said = restore(path, yes=True)

    assert re.search(r"ended \d+ idle session\(s\) of this process", said), said
    assert not Cluster.objects.filter(name="bk-after").exists(), "restored"
    with pytest.raises(psycopg.OperationalError):
        held[0].execute("SELECT 1")
    held[0].close()


# ---------------------------------------------------------------------------- the backup file


@pytest.mark.django_db(transaction=True)  # a backup sees committed rows only
def test_the_kubeconfig_plaintext_never_appears_in_the_backup(tmp_path):
    cluster = Cluster.objects.create(name="bk-secret", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    ciphertext = stored(cluster.pk)
    path, _ = backup(tmp_path)

    raw = path.read_bytes()
    assert SECRET_TOKEN.encode() not in raw and b"apiVersion" not in raw
    # What the payload holds, readable: the SQLite file itself; pg_dump's compressed archive as SQL.
    with tarfile.open(path) as tar:
        manifest = json.loads(tar.extractfile(backup_module.MANIFEST).read())
        payload = tar.extractfile(manifest["payload"]["name"]).read()
    if connection.vendor == "postgresql":
        pg_restore = backup_module.find_tool("pg_restore").path
        payload = subprocess.run([pg_restore, "--file=-"], input=payload, capture_output=True, check=True,
                                 timeout=60).stdout
    assert ciphertext.encode() in payload, "the readable form holds the rows (the check below can see them)"
    assert SECRET_TOKEN.encode() not in payload
    fingerprint = fields.key_fingerprint(fields.configured_keys()[0])
    assert manifest["encryption"]["values_by_key"] == {fingerprint: 1}


@pytest.mark.django_db
def test_a_failed_backup_leaves_no_file(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise backup_module.BackupError("the disk filled up")

    monkeypatch.setattr(backup_module, "base_manifest", broken)
    with pytest.raises(CommandError, match="backup failed, nothing written: the disk filled up"):
        backup(tmp_path)
    assert list(tmp_path.iterdir()) == []

    monkeypatch.undo()
    path, _ = backup(tmp_path)
    with pytest.raises(CommandError, match="already exists"):
        backup(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.django_db
def test_the_backup_is_a_tar_whose_checksums_sha256sum_accepts(tmp_path):
    path, _ = backup(tmp_path)
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--check", "--quiet", backup_module.CHECKSUMS], cwd=tmp_path / "x", check=True)
    manifest = json.loads((tmp_path / "x" / backup_module.MANIFEST).read_text())
    assert manifest["vendor"] == connection.vendor and manifest["format_version"] == backup_module.FORMAT_VERSION
    leaves = {app: name for app, name in MigrationLoader(connection).graph.leaf_nodes()}
    assert manifest["migrations"]["latest"]["federation"] == leaves["federation"]
    assert "fleet_cluster" in manifest["tables"]


# ---------------------------------------------------------------------------- key rotation


@pytest.mark.django_db
def test_key_rotation_re_encrypts_with_the_first_key(settings):
    settings.MERIDIAN_ENCRYPTION_KEYS = [OLD_KEY]
    old = Cluster.objects.create(name="bk-old-key", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    old_ciphertext = stored(old.pk)
    legacy = Cluster.objects.create(name="bk-legacy", connector=Cluster.ConnectorKind.KUBERNETES)
    Cluster.objects.filter(pk=legacy.pk).update(credentials="")
    with connection.cursor() as cursor:  # stored before encryption existed
        cursor.execute("UPDATE fleet_cluster SET credentials = %s WHERE id = %s", [KUBECONFIG, legacy.pk])

    settings.MERIDIAN_ENCRYPTION_KEYS = [NEW_KEY, OLD_KEY]
    assert Cluster.objects.get(pk=old.pk).credentials == KUBECONFIG, "old-key values still open before rotating"
    new = Cluster.objects.create(name="bk-new-key", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    new_ciphertext = stored(new.pk)

    out = io.StringIO()
    call_command("meridian_rotate_keys", "--dry-run", stdout=out)
    assert "1 would re-encrypt from an older key" in out.getvalue() and stored(old.pk) == old_ciphertext

    out = io.StringIO()
    call_command("meridian_rotate_keys", "--batch-size", "1", stdout=out)
    said = out.getvalue()
    assert ("fleet.Cluster.credentials: 3 value(s): 1 re-encrypted from an older key, 1 stored unencrypted encrypted, "
            "1 already under the first key") in said
    assert stored(old.pk) != old_ciphertext and stored(new.pk) == new_ciphertext
    assert stored(legacy.pk).startswith(fields.PREFIX)

    settings.MERIDIAN_ENCRYPTION_KEYS = [NEW_KEY]  # the old key dropped: everything still opens
    assert [c.credentials for c in Cluster.objects.filter(name__startswith="bk-").order_by("pk")] == [KUBECONFIG] * 3


@pytest.mark.django_db
def test_key_rotation_keeps_what_no_key_opens_and_fails(settings):
    settings.MERIDIAN_ENCRYPTION_KEYS = [OLD_KEY]
    lost = Cluster.objects.create(name="bk-lost", connector=Cluster.ConnectorKind.KUBERNETES, credentials=KUBECONFIG)
    ciphertext = stored(lost.pk)
    settings.MERIDIAN_ENCRYPTION_KEYS = [NEW_KEY]  # the old key was dropped too early

    out = io.StringIO()
    with pytest.raises(CommandError, match="Do not drop any key"):
        call_command("meridian_rotate_keys", stdout=out)
    assert "1 no configured key opens" in out.getvalue()
    assert stored(lost.pk) == ciphertext


# ---------------------------------------------------------------------------- PostgreSQL client programs


def test_the_newest_postgresql_client_is_chosen(tmp_path, monkeypatch):
    for major in ("12", "16", "14"):
        program = tmp_path / major / "bin" / "pg_dump"
        program.parent.mkdir(parents=True)
        program.write_text(f"#!/bin/sh\necho 'pg_dump (PostgreSQL) {major}.3 (Debian {major}.3-1)'\n")
        program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / '12' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(backup_module, "PG_BIN_GLOB", f"{tmp_path}/*/bin")
    tool = backup_module.find_tool("pg_dump")
    assert (tool.major, tool.version, tool.path) == (16, "16.3", str(tmp_path / "16" / "bin" / "pg_dump"))

    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setattr(backup_module, "PG_BIN_GLOB", f"{tmp_path}/none/*/bin")
    with pytest.raises(backup_module.BackupError, match="pg_dump was not found on PATH"):
        backup_module.find_tool("pg_dump")


@pytest.mark.django_db
def test_a_pg_dump_older_than_the_server_is_refused(tmp_path, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    monkeypatch.setattr(backup_module, "find_tool", lambda name: backup_module.Tool("/usr/bin/pg_dump", 9, "9.6"))
    with pytest.raises(CommandError, match=r"/usr/bin/pg_dump is version 9.6, older than the server"):
        backup(tmp_path)
    assert list(tmp_path.iterdir()) == []

"""Whole-database backups in one file, and restoring them (``meridian_backup`` / ``meridian_restore``).

A backup is a plain tar file (``tar tvf`` lists it) of three members, in this order:

- ``database.pgdump`` (PostgreSQL: ``pg_dump -Fc``) or ``database.sqlite3`` (SQLite: the
  backup API's copy of the database file): the payload, a raw copy of the database.
  Kubeconfigs stay encrypted in it (``core.fields``): nothing is decrypted.
- ``manifest.json``: format version, database vendor, creation time, the payload's size and
  SHA-256, the migrations applied in the copy (per app, and the latest per app), the tables
  it holds, and which encryption keys (by fingerprint) open its secrets.
- ``checksums.sha256``: ``sha256sum -c`` format over the payload and the manifest.

Both are consistent snapshots taken while Meridian keeps running. PostgreSQL: a
REPEATABLE READ transaction exports its snapshot, reads the manifest's facts in it, and
``pg_dump --snapshot`` dumps exactly that snapshot. SQLite: ``sqlite3.Connection.backup``
copies the file in one step (a read transaction, which WAL lets writers run beside); the
manifest is read from the copy.

A restore checks everything before it touches the database (checksums, format, vendor,
schema: refused when the backup holds a migration this code does not know), then replaces
the whole database at once or not at all: PostgreSQL in one transaction, SQLite by renaming
a complete, fsynced file over the old one. A backup older than the code is migrated after.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from django.apps import apps
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.loader import MigrationLoader
from django.dispatch import Signal

from .fields import configured_keys, encrypted_fields, key_fingerprint, opening_key

FORMAT = "meridian-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CHECKSUMS = "checksums.sha256"
PAYLOAD = {"postgresql": "database.pgdump", "sqlite": "database.sqlite3"}
VENDOR_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}
CHUNK = 1 << 20
BLOCK = 512
#: Where PostgreSQL client programs are looked for besides PATH (Debian/Ubuntu keep every
#: installed major version there; the newest is preferred).
PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"

#: Sent after a restore (and its migrate) finished: apps drop what they cache outside the
#: database (Redis) that the restored rows no longer match. Receivers are best effort.
database_restored = Signal()


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


# ---------------------------------------------------------------------------- the archive


def _tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.type = size, int(time.time()), 0o600, tarfile.REGTYPE
    header = info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    if len(header) != BLOCK:  # a short name and GNU's base-256 sizes keep it one block
        raise BackupError(f"unexpected tar header size for {name}")
    return header


class ArchiveWriter:
    """Writes tar members whose size is known only at the end (a streamed ``pg_dump``):
    a placeholder header, the data, then the real header written over the placeholder."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file

    def add_stream(self, name: str, chunks: Iterable[bytes]) -> tuple[int, str]:
        start = self.file.tell()
        self.file.write(b"\0" * BLOCK)
        digest, size = hashlib.sha256(), 0
        for chunk in chunks:
            self.file.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        self.file.write(b"\0" * (-size % BLOCK))
        end = self.file.tell()
        self.file.seek(start)
        self.file.write(_tar_header(name, size))
        self.file.seek(end)
        return size, digest.hexdigest()

    def add_bytes(self, name: str, data: bytes) -> str:
        return self.add_stream(name, [data])[1]

    def close(self) -> None:
        self.file.write(b"\0" * (2 * BLOCK))


def read_chunks(file: IO[bytes], size: int = CHUNK) -> Iterator[bytes]:
    while chunk := file.read(size):
        yield chunk


def write_archive(path: Path, payload_name: str, payload: Iterable[bytes], manifest_for: Callable[[int, str], dict]) -> dict:
    """Write a complete backup at ``path`` (which must not exist yet); ``manifest_for(size,
    sha256)`` builds the manifest once the payload is written. Returns the manifest."""
    # Created exclusively and private: the file holds password hashes and encrypted kubeconfigs.
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
        writer = ArchiveWriter(file)
        size, sha = writer.add_stream(payload_name, payload)
        manifest = manifest_for(size, sha)
        data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        manifest_sha = writer.add_bytes(MANIFEST, data)
        writer.add_bytes(CHECKSUMS, f"{sha}  {payload_name}\n{manifest_sha}  {MANIFEST}\n".encode())
        writer.close()
        file.flush()
        os.fsync(file.fileno())
    return manifest


@dataclass
class Backup:
    """An opened, checked backup file."""

    path: Path
    manifest: dict
    tar: tarfile.TarFile
    payload: tarfile.TarInfo

    @property
    def vendor(self) -> str:
        return self.manifest["vendor"]

    def open_payload(self) -> IO[bytes]:
        file = self.tar.extractfile(self.payload)
        if file is None:
            raise BackupError(f"{self.path}: the payload is not a regular file")
        return file

    def close(self) -> None:
        self.tar.close()


def replace_durably(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` and sync the directory, so the new name survives a crash."""
    os.replace(source, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def sha256_of(file: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in read_chunks(file):
        digest.update(chunk)
    return digest.hexdigest()


def open_backup(path: Path) -> Backup:
    """Open a backup and verify it whole: tar structure, manifest, both checksums (reads every byte)."""
    damaged = f"{path} is not a Meridian backup, or it is damaged"
    try:
        tar = tarfile.open(path, "r:")
    except FileNotFoundError:
        raise BackupError(f"{path}: no such file") from None
    except (tarfile.TarError, OSError) as exc:
        raise BackupError(f"{damaged}: {exc}") from None
    try:
        try:
            members = {m.name: m for m in tar.getmembers()}
        except (tarfile.TarError, OSError) as exc:
            raise BackupError(f"{damaged}: {exc}") from None
        if MANIFEST not in members or CHECKSUMS not in members or len(members) != 3:
            raise BackupError(f"{damaged}: expected a payload, {MANIFEST} and {CHECKSUMS}, found {sorted(members)}")
        manifest_bytes = tar.extractfile(members[MANIFEST]).read()
        checksums = _parse_checksums(tar.extractfile(members[CHECKSUMS]).read(), damaged)
        if checksums.get(MANIFEST) != hashlib.sha256(manifest_bytes).hexdigest():
            raise BackupError(f"{damaged}: the manifest does not match its checksum")
        try:
            manifest = json.loads(manifest_bytes)
        except ValueError as exc:
            raise BackupError(f"{damaged}: unreadable manifest ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise BackupError(f"{damaged}: its manifest does not name the format {FORMAT!r}")
        if not isinstance(manifest.get("format_version"), int) or manifest["format_version"] > FORMAT_VERSION:
            raise BackupError(f"{path} is in backup format {manifest.get('format_version')!r}, newer than this Meridian "
                              f"reads ({FORMAT_VERSION}): restore it with the Meridian version that made it")
        payload_name = (manifest.get("payload") or {}).get("name")
        payload = members.get(payload_name)
        if payload is None or set(members) != {payload_name, MANIFEST, CHECKSUMS}:
            raise BackupError(f"{damaged}: the manifest names a payload {payload_name!r} the file does not hold")
        backup = Backup(path, manifest, tar, payload)
        with backup.open_payload() as file:
            actual = sha256_of(file)
        if not (actual == checksums.get(payload_name) == manifest["payload"].get("sha256")) \
                or payload.size != manifest["payload"].get("size"):
            raise BackupError(f"{damaged}: the payload's SHA-256 is {actual}, the backup says "
                              f"{manifest['payload'].get('sha256')}")
        return backup
    except BaseException:
        tar.close()
        raise


def _parse_checksums(data: bytes, damaged: str) -> dict[str, str]:
    sums = {}
    for line in data.decode("utf-8", "replace").splitlines():
        match = re.fullmatch(r"([0-9a-f]{64}) [ *](\S+)", line)
        if not match:
            raise BackupError(f"{damaged}: unreadable {CHECKSUMS}")
        sums[match[2]] = match[1]
    return sums


# ---------------------------------------------------------------------------- what a manifest records


def known_migrations(loader: MigrationLoader | None = None) -> set[tuple[str, str]]:
    """Every migration this code knows: on disk, or replaced by a squashed one on disk."""
    loader = loader or MigrationLoader(None, ignore_no_migrations=True)
    known = set(loader.disk_migrations)
    for migration in loader.disk_migrations.values():
        known.update(tuple(r) for r in getattr(migration, "replaces", None) or ())
    return known


def migration_state(applied: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The applied migrations per app, and each app's latest (the applied one no other applied
    migration of the app depends on). Records of migrations this code does not know (left by
    ones deleted long ago) are not the schema: left out."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    known = known_migrations(loader)
    per_app: dict[str, list[str]] = {}
    for app, name in applied:
        if (app, name) in known:
            per_app.setdefault(app, []).append(name)
    graph = loader.graph
    latest = {}
    for app, names in per_app.items():
        names.sort()
        done = set(names)
        leaves = [n for n in names if (app, n) in graph.nodes
                  and not any(child[0] == app and child[1] in done for child in graph.node_map[(app, n)].children)]
        latest[app] = leaves[-1] if leaves else names[-1]
    return {"applied": dict(sorted(per_app.items())), "latest": dict(sorted(latest.items()))}


def key_usage(values: Iterable[str]) -> dict[str, Any]:
    """Which configured keys open the stored secrets (fingerprints, counts)."""
    keys = configured_keys()
    opened: dict[str, int] = {}
    for value in values:
        which = opening_key(value, keys) or "unknown"
        opened[which] = opened.get(which, 0) + 1
    return {"configured_keys": [key_fingerprint(k) for k in keys], "values_by_key": dict(sorted(opened.items()))}


def snapshot_facts(execute: Callable[[str], list[tuple]], tables: list[str], quote: Callable[[str], str]) -> dict[str, Any]:
    """What the manifest records about a database, read through ``execute`` inside its snapshot."""
    present = set(tables)
    applied = execute("SELECT app, name FROM django_migrations") if "django_migrations" in present else []
    secrets: list[str] = []
    for model, field in encrypted_fields():
        table = model._meta.db_table
        if table in present:
            column = quote(field.column)
            secrets += [row[0] for row in execute(f"SELECT {column} FROM {quote(table)} WHERE {column} <> ''") if row[0]]
    return {"migrations": migration_state(applied), "tables": sorted(tables), "encryption": key_usage(secrets)}


def base_manifest(vendor: str, created: datetime, size: int, sha: str, facts: dict, **extra: Any) -> dict:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "vendor": vendor,
            "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "payload": {"name": PAYLOAD[vendor], "size": size, "sha256": sha}, **facts, **extra}


# ---------------------------------------------------------------------------- schema compatibility


@dataclass
class SchemaCheck:
    unknown: list[str]  # applied in the backup, unknown to this code: the backup is newer
    pending: list[str]  # known to this code, not applied in the backup: migrate after restoring

    @property
    def newer(self) -> bool:
        return bool(self.unknown)

    @property
    def older(self) -> bool:
        return bool(self.pending)


def check_schema(manifest: dict) -> SchemaCheck:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    applied = {(app, name) for app, names in (manifest.get("migrations") or {}).get("applied", {}).items() for name in names}
    known = known_migrations(loader)
    unknown = sorted(f"{app}.{name}" for app, name in applied - known)
    pending = []
    for key in sorted(loader.graph.nodes):
        migration = loader.graph.nodes[key]
        replaced = {tuple(r) for r in getattr(migration, "replaces", None) or ()}
        if key not in applied and not (replaced and replaced <= applied):
            pending.append(f"{key[0]}.{key[1]}")
    return SchemaCheck(unknown, pending)


# ---------------------------------------------------------------------------- connections


def close_connections() -> None:
    """Close this process's database connections, and PostgreSQL pools with them: a restore
    must not wait on (or be blocked by) our own idle sessions."""
    for conn in connections.all(initialized_only=True):
        conn.close()
        if getattr(conn, "pool", None) is not None:
            conn.close_pool()


def own_ports() -> set[tuple[str, int]]:
    """(address, port) of this process's TCP sockets: the server sees a session of ours coming
    from one of them."""
    import psutil

    try:
        return {(c.laddr.ip, c.laddr.port) for c in psutil.Process().net_connections(kind="tcp") if c.laddr}
    except psutil.Error:
        return set()


def describe_target(connection: BaseDatabaseWrapper) -> str:
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"SQLite database {settings_dict['NAME']}"
    where = settings_dict.get("HOST") or "the local socket"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"PostgreSQL database {settings_dict.get('NAME')!r} on {where}{port}"


# ---------------------------------------------------------------------------- PostgreSQL


_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Tool:
    path: str
    major: int
    version: str


def _tool_version(path: str) -> Tool | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION.search(out)
    if not match:
        return None
    return Tool(path, int(match[1]), f"{match[1]}.{match[2] or 0}")


def find_tool(name: str) -> Tool:
    """The newest ``name`` (pg_dump, pg_restore, psql) on PATH or under /usr/lib/postgresql/*/bin."""
    candidates = []
    on_path = shutil.which(name)
    if on_path:
        candidates.append(on_path)
    candidates += [str(Path(d) / name) for d in sorted(Path("/").glob(PG_BIN_GLOB.lstrip("/")))]
    unique = {os.path.realpath(c): c for c in candidates if os.access(c, os.X_OK)}
    found = [tool for tool in map(_tool_version, unique.values()) if tool is not None]
    if not found:
        raise BackupError(f"{name} was not found on PATH nor under {PG_BIN_GLOB}: install the PostgreSQL client "
                          f"programs (Debian: postgresql-client) of the server's major version or newer")
    return max(found, key=lambda t: (t.major, t.path == on_path))


def libpq_connection(connection: BaseDatabaseWrapper) -> tuple[str, dict[str, str], str | None]:
    """Django's connection settings as a libpq connection string for ``-d`` (hosts, port,
    dbname, user, sslmode and every other libpq option in OPTIONS), the password in
    PGPASSWORD (never on a command line), and the role to ``SET ROLE`` to (OPTIONS' ``assume_role``)."""
    from psycopg import pq
    from psycopg.conninfo import make_conninfo

    params = connection.get_connection_params()
    libpq_keys = {option.keyword.decode() for option in pq.Conninfo.get_defaults()}
    env = {}
    password = params.pop("password", None)
    if password:
        env["PGPASSWORD"] = str(password)
    conninfo = make_conninfo("", **{k: v for k, v in params.items() if k in libpq_keys and v is not None})
    return conninfo, env, connection.settings_dict["OPTIONS"].get("assume_role")


def _direct(connection: BaseDatabaseWrapper):
    """A psycopg connection outside Django and its pool (autocommit)."""
    import psycopg

    conninfo, env, _ = libpq_connection(connection)
    return psycopg.connect(conninfo, password=env.get("PGPASSWORD"), autocommit=True)


def _stderr_tail(file: IO[bytes], limit: int = 2000) -> str:
    file.seek(0)
    text = file.read().decode("utf-8", "replace").strip()
    return text[-limit:] if text else "(no output)"


_TABLES = ("SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
           "WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'pg_toast') "
           "AND pg_catalog.pg_table_is_visible(c.oid)")


def backup_postgresql(connection: BaseDatabaseWrapper, path: Path, log: Callable[[str], None]) -> dict:
    pg_dump = find_tool("pg_dump")
    conninfo, env, role = libpq_connection(connection)
    created = datetime.now(UTC)
    # The snapshot's transaction is a connection of its own (never Django's, which may be in
    # a transaction already); it stays open until pg_dump, which imports it, is done.
    with _direct(connection) as direct:
        direct.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        if role:
            direct.execute(f"SET ROLE {connection.ops.quote_name(role)}")
        snapshot, server_version, version_num = direct.execute(
            "SELECT pg_export_snapshot(), current_setting('server_version'), "
            "current_setting('server_version_num')::int").fetchone()
        server_major = version_num // 10000
        if pg_dump.major < server_major:
            raise BackupError(f"{pg_dump.path} is version {pg_dump.version}, older than the server ({server_version}): "
                              f"install the PostgreSQL {server_major} client programs (or newer)")

        def execute(sql: str) -> list[tuple]:
            return direct.execute(sql).fetchall()

        facts = snapshot_facts(execute, [row[0] for row in execute(_TABLES)], connection.ops.quote_name)
        argv = [pg_dump.path, "--format=custom", f"--snapshot={snapshot}", "--dbname", conninfo]
        if role:
            argv.append(f"--role={role}")
        log(f"pg_dump {pg_dump.version} ({pg_dump.path}) from PostgreSQL {server_version}")
        details = {"server_version": server_version, "server_major": server_major, "pg_dump_version": pg_dump.version,
                   "pg_dump_major": pg_dump.major, "database": connection.settings_dict.get("NAME")}
        with tempfile.TemporaryFile() as stderr:
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, env={**os.environ, **env})
            try:
                manifest = write_archive(
                    path, PAYLOAD["postgresql"], read_chunks(process.stdout),
                    lambda size, sha: base_manifest("postgresql", created, size, sha, facts, postgresql=details))
            finally:
                process.stdout.close()
                code = process.wait()
            if code != 0:
                raise BackupError(f"pg_dump failed (exit {code}): {_stderr_tail(stderr)}")
        direct.execute("COMMIT")
    return manifest


#: A session whose client has just gone (our own pool closed above, a process that exited) is
#: listed until its server process has ended, a moment later — longer on a busy server.
ENDING_SESSIONS_SECONDS = 5.0


def _sessions_in_the_way(direct, log: Callable[[str], None], ended: set[int]) -> list[tuple]:
    """Other processes' sessions on the database, as (pid, user, application, address, state);
    this very process's (its other threads' connections) are ended instead: ours to end.
    ``ended`` holds the sessions ended by an earlier look (still listed while they go): they
    are neither ended nor reported again."""
    sessions = direct.execute(
        "SELECT pid, usename, application_name, coalesce(host(client_addr), 'local'), state, client_port "
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend' ORDER BY pid").fetchall()
    ports = own_ports()
    own = [row[0] for row in sessions if (row[3], row[5]) in ports and row[0] not in ended]
    if own:
        direct.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [own])
        log(f"ended {len(own)} idle session(s) of this process")
        ended.update(own)
    return [row[:5] for row in sessions if row[0] not in ended]


def restore_postgresql(connection: BaseDatabaseWrapper, backup: Backup, *, allow_connections: bool,
                       log: Callable[[str], None]) -> None:
    info = backup.manifest.get("postgresql") or {}
    pg_restore, psql = find_tool("pg_restore"), find_tool("psql")
    if pg_restore.major < info.get("pg_dump_major", 0):
        raise BackupError(f"{pg_restore.path} is version {pg_restore.version}; the backup was written by pg_dump "
                          f"{info.get('pg_dump_version')}: install the PostgreSQL {info.get('pg_dump_major')} client "
                          f"programs (or newer)")
    conninfo, env, role = libpq_connection(connection)
    # Tables of this code's models that the backup lacks (made by migrations newer than the
    # backup): dropped in the restore's transaction, so pg_restore --clean can drop the
    # tables they point at, and migrate re-creates them (empty, as they were at backup time).
    ours = {m._meta.db_table for m in apps.get_models(include_auto_created=True)}
    existing = set(connection.introspection.table_names())
    extra = sorted((ours & existing) - set(backup.manifest.get("tables", [])))
    close_connections()
    with _direct(connection) as direct:
        server_major = int(direct.execute("SHOW server_version_num").fetchone()[0]) // 10000
        if server_major < info.get("server_major", 0):
            raise BackupError(f"the backup is of PostgreSQL {info.get('server_version')}; this server is older "
                              f"({server_major}): restore it into PostgreSQL {info.get('server_major')} or newer")
        ended: set[int] = set()
        others = _sessions_in_the_way(direct, log, ended)
        deadline = time.monotonic() + ENDING_SESSIONS_SECONDS
        while others and not allow_connections and time.monotonic() < deadline:
            time.sleep(0.1)
            others = _sessions_in_the_way(direct, log, ended)
    if others:
        listing = "; ".join(f"pid {pid} {user}@{addr} {app or '-'} ({state})" for pid, user, app, addr, state in others)
        if not allow_connections:
            raise BackupError(f"{len(others)} other session(s) are connected to the database: {listing}. Stop Meridian "
                              f"(web, workers, beat) and anything else using it, then restore again; nothing was "
                              f"terminated or changed (--allow-connections restores anyway: it waits for their locks)")
        log(f"restoring with {len(others)} other session(s) connected (--allow-connections): {listing}")
    prelude = ""
    if role:
        prelude += f"SET ROLE {connection.ops.quote_name(role)};\n"
    if extra:
        log(f"dropping {len(extra)} table(s) newer than the backup, in the same transaction: {', '.join(extra)}")
        prelude += f"DROP TABLE IF EXISTS {', '.join(connection.ops.quote_name(t) for t in extra)} CASCADE;\n"
    restore_argv = [pg_restore.path, "--clean", "--if-exists", "--no-owner", "--exit-on-error", "--file=-"]
    if role:
        restore_argv.append(f"--role={role}")
    psql_argv = [psql.path, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction", "--dbname", conninfo]
    if prelude:
        psql_argv += ["--command", prelude]
    psql_argv += ["--file=-"]
    log(f"pg_restore {pg_restore.version} | psql --single-transaction ({pg_restore.path})")
    _pipe_restore(backup, restore_argv, psql_argv, {**os.environ, **env})


def _pipe_restore(backup: Backup, restore_argv: list[str], psql_argv: list[str], env: dict[str, str]) -> None:
    """payload → pg_restore (SQL script) → psql, one transaction. psql commits only when its
    input ends, and its input ends only when pg_restore has succeeded: on any failure psql is
    killed before it ever sees the end, and the server rolls the whole transaction back."""
    with tempfile.TemporaryFile() as restore_err, tempfile.TemporaryFile() as psql_err:
        restore = subprocess.Popen(restore_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=restore_err, env=env)
        psql = subprocess.Popen(psql_argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=psql_err, env=env)
        feed_error: list[BaseException] = []

        def feed() -> None:
            try:
                with backup.open_payload() as payload:
                    for chunk in read_chunks(payload):
                        restore.stdin.write(chunk)
            except BaseException as exc:  # noqa: BLE001 - reported below
                feed_error.append(exc)
            finally:
                with contextlib.suppress(OSError):
                    restore.stdin.close()

        feeder = threading.Thread(target=feed, name="backup-feed", daemon=True)
        feeder.start()
        piped = True
        try:
            try:
                for chunk in read_chunks(restore.stdout, 1 << 16):
                    psql.stdin.write(chunk)
            except (BrokenPipeError, OSError):
                piped = False  # psql stopped reading: it failed (its own error says why)
            restore.stdout.close()
            restore_code = restore.wait()
            feeder.join()
            if not piped:
                raise BackupError(f"psql failed; the transaction was rolled back, nothing changed: {_stderr_tail(psql_err)}")
            if restore_code != 0 or feed_error:
                reason = f"{feed_error[0]}" if feed_error else _stderr_tail(restore_err)
                raise BackupError(f"pg_restore failed (exit {restore_code}); nothing changed: {reason}")
        except BaseException:  # a failure, Ctrl-C: psql dies before it reads the end of its input (no COMMIT)
            for process in (psql, restore):
                process.kill()
                process.wait()
            raise
        with contextlib.suppress(BrokenPipeError):
            psql.stdin.close()
        psql_code = psql.wait()
        if psql_code != 0:
            raise BackupError(f"psql failed (exit {psql_code}); the transaction was rolled back, nothing changed: "
                              f"{_stderr_tail(psql_err)}")


# ---------------------------------------------------------------------------- SQLite


def sqlite_path(connection: BaseDatabaseWrapper) -> Path:
    name = str(connection.settings_dict["NAME"])
    if name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
        raise BackupError(f"the SQLite database {name!r} is not a file: nothing to back up or restore")
    return Path(name)


def _sqlite_facts(db: sqlite3.Connection) -> dict:
    def execute(sql: str) -> list[tuple]:
        return db.execute(sql).fetchall()

    tables = [row[0] for row in execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return snapshot_facts(execute, tables, lambda name: '"' + name.replace('"', '""') + '"')


def backup_sqlite(connection: BaseDatabaseWrapper, path: Path, log: Callable[[str], None]) -> dict:
    source_path = sqlite_path(connection)
    if not source_path.exists():
        raise BackupError(f"{source_path} does not exist")
    created = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix=f"{path.name}.", suffix=".sqlite", dir=path.parent) as scratch:
        copy_path = Path(scratch) / PAYLOAD["sqlite"]
        source = sqlite3.connect(f"{source_path.absolute().as_uri()}?mode=rw", uri=True, timeout=30)
        copy = sqlite3.connect(copy_path)
        try:
            source.backup(copy)  # one step: a single read transaction, a consistent snapshot
            copy.execute("PRAGMA journal_mode=DELETE")  # a self-contained file (no -wal beside it)
            facts = _sqlite_facts(copy)
        finally:
            copy.close()
            source.close()
        log(f"SQLite {sqlite3.sqlite_version} online backup of {source_path}")
        with open(copy_path, "rb") as payload:
            return write_archive(path, PAYLOAD["sqlite"], read_chunks(payload), lambda size, sha: base_manifest(
                "sqlite", created, size, sha, facts, sqlite={"sqlite_version": sqlite3.sqlite_version,
                                                              "database": str(source_path)}))


def restore_sqlite(connection: BaseDatabaseWrapper, backup: Backup, *, log: Callable[[str], None]) -> None:
    target = sqlite_path(connection)
    target.parent.mkdir(parents=True, exist_ok=True)
    close_connections()
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.restore-", dir=target.parent)
    temp = Path(temp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, backup.open_payload() as payload:
            for chunk in read_chunks(payload):
                out.write(chunk)
                digest.update(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != backup.manifest["payload"]["sha256"]:
            raise BackupError(f"{backup.path} changed while it was being restored; nothing changed")
        check = sqlite3.connect(f"{temp.absolute().as_uri()}?mode=ro", uri=True)
        try:
            verdict = check.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        finally:
            check.close()
        if verdict != "ok":
            raise BackupError(f"the backup's database fails SQLite's quick_check ({verdict}); nothing changed")
        if target.exists():  # the new file keeps the old one's mode and (when allowed) owner
            current = target.stat()
            os.chmod(temp, current.st_mode & 0o7777)
            with contextlib.suppress(PermissionError):
                os.chown(temp, current.st_uid, current.st_gid)
        _swap_sqlite(temp, target, log)
    finally:
        temp.unlink(missing_ok=True)


def _swap_sqlite(new: Path, target: Path, log: Callable[[str], None]) -> None:
    """Rename ``new`` over ``target`` while holding it exclusively. Leaving WAL mode needs every
    other connection closed, so it doubles as the check that Meridian is stopped; it also folds
    the WAL into the old file, and no -wal/-shm of the old database is left for the new one."""
    live = None
    if target.exists():
        live = sqlite3.connect(target, timeout=2, isolation_level=None)
        try:
            mode = live.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
            if mode != "delete":
                raise sqlite3.OperationalError(f"journal mode stayed {mode}")
            live.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError as exc:
            live.close()
            raise BackupError(f"{target} is in use by another process ({exc}): stop Meridian (make run, or the web "
                              f"server, workers and beat) and restore again; nothing changed") from None
    try:
        for suffix in ("-wal", "-shm", "-journal"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        replace_durably(new, target)
    finally:
        if live is not None:
            with contextlib.suppress(sqlite3.Error):
                live.execute("ROLLBACK")
            live.close()
    log(f"replaced {target}")


# ---------------------------------------------------------------------------- entry points


def default_filename(vendor: str, when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    return f"meridian-backup-{vendor}-{when.strftime('%Y%m%dT%H%M%SZ')}.tar"


def create_backup(connection: BaseDatabaseWrapper, final: Path, log: Callable[[str], None]) -> dict:
    """Write the backup to a temporary name beside ``final`` and rename it there only when complete."""
    if connection.vendor not in PAYLOAD:
        raise BackupError(f"backups of {connection.vendor} databases are not supported")
    if final.exists():
        raise BackupError(f"{final} already exists: choose another --output")
    if not final.parent.is_dir():
        raise BackupError(f"{final.parent} is not a directory")
    temp = final.parent / f".{final.name}.{secrets.token_hex(4)}.partial"
    try:
        if connection.vendor == "postgresql":
            manifest = backup_postgresql(connection, temp, log)
        else:
            manifest = backup_sqlite(connection, temp, log)
        replace_durably(temp, final)
        return manifest
    finally:
        temp.unlink(missing_ok=True)


def undecryptable_secrets(connection: BaseDatabaseWrapper) -> dict[str, int]:
    """Stored secrets no configured key opens, per field (after a restore: the keys are wrong)."""
    keys = configured_keys()
    counts = {}
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for model, field in encrypted_fields():
            cursor.execute(f"SELECT {quote(field.column)} FROM {quote(model._meta.db_table)} "
                           f"WHERE {quote(field.column)} <> ''")
            bad = sum(1 for (value,) in cursor.fetchall() if value and opening_key(value, keys) is None)
            if bad:
                counts[f"{model._meta.label}.{field.name}"] = bad
    return counts


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


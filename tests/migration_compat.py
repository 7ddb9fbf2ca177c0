"""Rolling-upgrade compatibility of migrations (docs/upgrades.md), for tests/test_migrations_compat.py.

During a rolling upgrade release N's migrations run while release N−1's pods still serve, so
every migration after the release baseline (``config/release.py``) must leave a schema that
N−1's code still reads and writes. Three checks:

- ``check_migration`` (static): walks each operation with the project states before and
  after it, as ``migrate`` does, and refuses what N−1 cannot live with, unless the migration
  carries the marker that documents why it is safe (``MARKERS``).
- ``OldCode`` (dynamic): N−1's historical models (the baseline's project state) insert, read,
  update and delete a row of every model against whatever schema the database has.
- ``lock_hazards`` (PostgreSQL): the SQL a migration sends, scanned for statements that block
  writes to a fleet-scale table for as long as they scan or rewrite it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import re
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres import operations as pg_ops
from django.db import models, transaction
from django.db.migrations import Migration, operations as ops
from django.db.migrations.graph import MigrationGraph
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState
from django.db.models.functions import Now

from config import release
from core import migration_ops

Node = tuple[str, str]

#: Module attributes of a migration that document why a step refused by default is safe. The
#: value is the reason, a non-empty string; a dependency's migration gets them from
#: ``config.release.REVIEWED`` instead.
#: CONTRACT: removes, renames or tightens what the release before the baseline stopped using
#: (it must name the release that shipped the expand step: "...; the expand shipped in release X").
#: DATA_STEP: RunPython / RunSQL, run while N−1 writes (what N−1 writes meanwhile, and why that is fine).
#: LONG_LOCK: a statement that blocks writes to a fleet-scale table while it scans or rewrites it.
MARKERS = ("CONTRACT", "DATA_STEP", "LONG_LOCK")
CONTRACT_NAMES_A_RELEASE = re.compile(r"\brelease\s+\S+", re.IGNORECASE)

#: Tables that grow with the fleet (nodes, pods, workloads, CPUs) or with time (samples, the
#: audit log), at 500 clusters / 200k nodes: an index built on one, or a constraint validated,
#: or a column rewritten, while N−1 serves holds its writes for seconds to minutes. Every
#: other table is small enough (hundreds to a few thousand rows: clusters, config types and
#: targets, quota groups, policies, tokens, and core_job, which the reaper prunes) that a
#: plain CREATE INDEX takes milliseconds. A new table that grows with the fleet goes here.
LARGE_TABLES = {
    "fleet_node": "one row per node (200k)",
    "fleet_pod": "one row per pod",
    "fleet_workload": "one row per workload (100k)",
    "fleet_simulatedobject": "every object applied to a simulated cluster",
    "nodeconfig_nodeconfig": "one row per node and config type",
    "quotas_quotacharge": "one row per admitted workload (100k)",
    "quotas_cashsample": "a sample per group and reconcile",
    "federation_federatedobject": "one row per federated workload",
    "federation_federatedrevision": "a revision per template change",
    "federation_memberobject": "one row per federated object and member cluster",
    "federation_waterlevelsample": "a sample per cluster and minute",
    "federation_waterlevelrollup": "hourly and daily averages per cluster (400 days)",
    "scheduling_nodecpu": "one row per node (200k)",
    "scheduling_cpuallocation": "one row per co-located pod",
    "scheduling_cpuclaim": "one row per node and claimed CPU",
    "core_objectchange": "the audit log (180 days)",
}


@dataclass(frozen=True)
class Problem:
    """One refusal: which migration, which operation, which rule, and what N−1 would hit."""

    migration: str
    operation: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.migration}: {self.operation}: {self.detail} [{self.rule}]"


# --- the baseline -----------------------------------------------------------------------


def load() -> MigrationLoader:
    return MigrationLoader(None, ignore_no_migrations=True)


def baseline_nodes(graph: MigrationGraph, baseline: dict[str, str] | None = None) -> list[Node]:
    baseline = release.BASELINE if baseline is None else baseline
    nodes = sorted(baseline.items())
    missing = [f"{app}.{name}" for app, name in nodes if (app, name) not in graph.nodes]
    if missing:
        raise LookupError(f"config/release.py names migrations that do not exist: {missing}")
    return nodes


def migrations_after(loader: MigrationLoader, baseline: dict[str, str] | None = None) -> list[Migration]:
    """What the next release applies on top of the baseline, in the order ``migrate`` applies
    it: every migration that is no baseline migration's ancestor (an app the baseline does
    not name is new, so all of its migrations count)."""
    graph = loader.graph
    released = {node for root in baseline_nodes(graph, baseline) for node in graph.forwards_plan(root)}
    plan: list[Node] = []
    for leaf in sorted(graph.leaf_nodes()):
        plan += [node for node in graph.forwards_plan(leaf) if node not in released and node not in plan]
    return [graph.nodes[node] for node in plan]


def baseline_state(loader: MigrationLoader, baseline: dict[str, str] | None = None) -> ProjectState:
    """Release N−1's models, as its migrations left them."""
    return loader.project_state(baseline_nodes(loader.graph, baseline), at_end=True)


# --- reading project states without rendering them ---------------------------------------


def table_of(state: ProjectState, app_label: str, model_name: str) -> str:
    model = state.models[app_label, model_name.lower()]
    return model.options.get("db_table") or f"{app_label}_{model.name_lower}"


def column_of(name: str, field: models.Field) -> str | None:
    """The column a field of a model state stores into (None for a many-to-many)."""
    if field.many_to_many:
        return None
    if field.db_column:
        return field.db_column
    return f"{name}_id" if field.many_to_one or field.one_to_one else name


def m2m_table(table: str, name: str, field: models.Field) -> str | None:
    """The table of an auto-created many-to-many (an explicit ``through`` model is a model)."""
    if getattr(field.remote_field, "through", None):
        return None
    return field.db_table or f"{table}_{name}"


def schema_of_model(state: ProjectState, key: tuple[str, str]) -> set[str]:
    return {column_of(name, field) for name, field in state.models[key].fields.items() if not field.many_to_many}


def schema_of(state: ProjectState) -> dict[str, set[str]]:
    """Every table the models of a state use, with the columns they read and write."""
    tables: dict[str, set[str]] = {}
    for (app_label, _), model in state.models.items():
        if not model.options.get("managed", True) or model.options.get("proxy"):
            continue
        table = table_of(state, app_label, model.name)
        tables[table] = schema_of_model(state, (app_label, model.name_lower))
        for name, field in model.fields.items():
            if field.many_to_many and (through := m2m_table(table, name, field)):
                tables[through] = set()
    return tables


# --- the static rules -------------------------------------------------------------------

#: Field arguments that change nothing in the database (validation, forms, Python defaults,
#: ORM-side behaviour), so an AlterField changing only these is no schema change at all.
NOT_IN_DATABASE = {
    "verbose_name", "help_text", "blank", "default", "editable", "validators", "error_messages", "db_comment",
    "on_delete", "related_name", "related_query_name", "limit_choices_to", "auto_now", "auto_now_add",
    "serialize", "unique_for_date", "unique_for_month", "unique_for_year", "protocol", "unpack_ipv4",
    "encoder", "decoder", "db_index",  # an index changes no value N−1 reads or writes (its build: LONG_LOCK)
}
#: Operations that change no table N−1 uses, or only add to the schema.
HARMLESS = (ops.CreateModel, ops.RemoveIndex, migration_ops.DropIndex, ops.RenameIndex, ops.RemoveConstraint, ops.AlterConstraint,
            ops.AlterModelOptions, ops.AlterModelManagers, ops.AlterModelTableComment,
            pg_ops.CreateExtension, pg_ops.CreateCollation, pg_ops.RemoveCollation)
#: django.contrib.postgres operations that fail on SQLite, where Meridian also runs.
POSTGRES_ONLY = (pg_ops.RemoveIndexConcurrently, pg_ops.AddConstraintNotValid, pg_ops.ValidateConstraint)


def markers_of(migration: Migration) -> dict[str, str]:
    module = sys.modules.get(type(migration).__module__)
    found = {name: getattr(module, name) for name in MARKERS if isinstance(getattr(module, name, None), str)}
    found.update(release.REVIEWED.get(f"{migration.app_label}.{migration.name}", {}))
    return {name: reason.strip() for name, reason in found.items() if reason.strip()}


def is_concurrent(op: ops.AddIndex) -> bool:
    return isinstance(op, pg_ops.AddIndexConcurrently)


def field_tightenings(old: models.Field, new: models.Field) -> list[str]:
    """What an AlterField takes away from rows N−1 writes or reads; [] when it only relaxes
    (adds null, choices or a database default, lengthens, drops a uniqueness)."""
    _, old_path, old_args, old_kw = old.deconstruct()
    _, new_path, new_args, new_kw = new.deconstruct()
    found = []
    if (old_path, old_args) != (new_path, new_args):
        found.append(f"changes the type from {old_path.rsplit('.', 1)[-1]} to {new_path.rsplit('.', 1)[-1]}")
    if old.null and not new.null:
        found.append("makes the column NOT NULL")
    if new.unique and not old.unique:
        found.append("makes the column unique")
    if old.max_length and (new.max_length or 0) < old.max_length and new.max_length is not None:
        found.append(f"shortens max_length {old.max_length} → {new.max_length}")
    for size in ("max_digits", "decimal_places"):
        if getattr(old, size, None) and (getattr(new, size, None) or 0) < getattr(old, size):
            found.append(f"lowers {size} {getattr(old, size)} → {getattr(new, size)}")
    if old.choices and new.choices is not None:
        if lost := {v for v, _ in old.flatchoices} - {v for v, _ in new.flatchoices}:
            found.append(f"drops choices {sorted(map(str, lost))} N−1 still writes")
    elif new.choices and not old.choices:
        found.append("limits the column to choices N−1 does not know")
    if "db_default" in old_kw and "db_default" not in new_kw:
        found.append("drops the database default N−1's inserts leave the column to")
    judged = NOT_IN_DATABASE | {"null", "unique", "max_length", "max_digits", "decimal_places", "choices",
                                "db_default", "db_column"}
    for key in sorted((old_kw.keys() | new_kw.keys()) - judged):
        if old_kw.get(key) != new_kw.get(key):
            found.append(f"changes {key} {old_kw.get(key)!r} → {new_kw.get(key)!r}")
    return found


def index_build(old: models.Field | None, new: models.Field) -> bool:
    """Whether the field change makes the database build an index over the column."""
    indexed = new.db_index or new.unique
    return indexed and not (old is not None and (old.db_index or old.unique))


def rewrites(old: models.Field, new: models.Field) -> bool:
    """Whether PostgreSQL rewrites (or scans) the table under an ACCESS EXCLUSIVE lock."""
    widened = (old.max_length or 0) <= (new.max_length or 0) or new.max_length is None
    same_type = old.deconstruct()[1] == new.deconstruct()[1] and widened
    for size in ("max_digits", "decimal_places"):
        same_type = same_type and getattr(old, size, None) == getattr(new, size, None)
    return not same_type or (old.null and not new.null)


class Checker:
    """The rules for one migration; ``problems`` holds what it refuses."""

    def __init__(self, migration: Migration, baseline: ProjectState, markers: dict[str, str]):
        self.migration = migration
        self.label = f"{migration.app_label}.{migration.name}"
        self.app_label = migration.app_label
        self.markers = markers
        self.baseline = schema_of(baseline)
        self.problems: list[Problem] = []

    def refuse(self, op: ops.base.Operation, rule: str, detail: str) -> None:
        self.problems.append(Problem(self.label, op.describe(), rule, detail))

    # What N−1 uses of the schema.
    def old_table(self, state: ProjectState, model_name: str) -> str | None:
        table = table_of(state, self.app_label, model_name)
        return table if table in self.baseline else None

    def large(self, table: str | None) -> bool:
        return table in LARGE_TABLES

    # The markers.
    def contract(self, op, what: str) -> None:
        if "CONTRACT" not in self.markers:
            self.refuse(op, "contract-unmarked", f"{what}: a contract step, allowed only in a migration marked "
                        "CONTRACT = \"why; the expand shipped in release X\", a release after its expand")
        elif not CONTRACT_NAMES_A_RELEASE.search(self.markers["CONTRACT"]):
            self.refuse(op, "contract-unmarked", "CONTRACT must name the release that shipped the expand step "
                        f"(\"...; the expand shipped in release X\"), not {self.markers['CONTRACT']!r}")

    def long_lock(self, op, table: str, what: str) -> None:
        if "LONG_LOCK" not in self.markers:
            self.refuse(op, "long-lock", f"{what} on {table} ({LARGE_TABLES[table]}) blocks N−1's writes to it "
                        "while PostgreSQL scans or rewrites the table")

    def still_used(self, op, what: str) -> None:
        self.refuse(op, "removes-used", f"{what}, which release N−1's models still read and write: first "
                    "release models without it (SeparateDatabaseAndState, column nullable or with db_default)")

    # The walk.
    def check(self, op: ops.base.Operation, before: ProjectState, after: ProjectState) -> None:
        if isinstance(op, ops.SeparateDatabaseAndState):
            state = before  # as SeparateDatabaseAndState.database_forwards walks them
            for inner in op.database_operations:
                following = state.clone()
                inner.state_forwards(self.app_label, following)
                self.check(inner, state, following)
                state = following
            self.orphans(op, database=state, named=after)
        elif isinstance(op, POSTGRES_ONLY) or type(op) is pg_ops.AddIndexConcurrently:
            self.refuse(op, "postgres-only", f"{type(op).__name__} fails on SQLite, where Meridian also runs"
                        + (": use core.migration_ops.AddIndexConcurrently" if isinstance(op, ops.AddIndex) else ""))
        elif rule := next((rule for kinds, rule in self.RULES if isinstance(op, kinds)), None):
            rule(self, op, before, after)
        else:
            self.refuse(op, "unknown-operation", f"no rule for {type(op).__name__}: decide whether it is an expand "
                        "step and teach tests/migration_compat.py")

    def orphans(self, op, database: ProjectState, named: ProjectState) -> None:
        """Columns the models stop naming (state only) while the table keeps them: the
        release's own INSERTs leave them out, so each must be nullable or have a db_default."""
        for key, model in database.models.items():
            if key not in named.models:
                continue
            columns = schema_of_model(named, key)
            for name, field in model.fields.items():
                column = column_of(name, field)
                if column and column not in columns and not field.null and field.db_default is models.NOT_PROVIDED:
                    self.refuse(op, "orphan-column", f"{table_of(database, *key)}.{column} stays NOT NULL without a "
                                "database default while the models drop it, so this release's own INSERTs fail: make "
                                "it nullable or give it a db_default in database_operations")

    def add_index(self, op: ops.AddIndex, before: ProjectState, after: ProjectState) -> None:
        if is_concurrent(op):
            if self.migration.atomic:
                self.refuse(op, "concurrent-in-transaction", "an index is built concurrently only outside a "
                            "transaction: the migration must say atomic = False")
            return
        table = self.old_table(before, op.model_name)
        if self.large(table):
            self.long_lock(op, table, "CREATE INDEX (use core.migration_ops.AddIndexConcurrently)")

    def add_field(self, op: ops.AddField, before: ProjectState, after: ProjectState) -> None:
        table = self.old_table(before, op.model_name)
        field = op.field
        if table is None or field.many_to_many:
            return  # a table N−1 does not have, or a new one (the many-to-many's)
        if not field.null and field.db_default is models.NOT_PROVIDED:
            self.refuse(op, "not-null-column", f"adds {table}.{column_of(op.name, field)} NOT NULL without a "
                        "database default: N−1's INSERTs leave it out and fail; give it null=True or a db_default")
        if self.large(table):
            if index_build(None, field):
                self.long_lock(op, table, "an index on the new column (db_index=False, then AddIndexConcurrently)")
            if field.db_default is not models.NOT_PROVIDED and not isinstance(field.db_default, (models.Value, Now)):
                self.long_lock(op, table, "a computed database default (PostgreSQL rewrites the table)")

    def alter_field(self, op: ops.AlterField, before: ProjectState, after: ProjectState) -> None:
        table = self.old_table(before, op.model_name)
        if table is None:
            return
        old = before.models[self.app_label, op.model_name_lower].fields[op.name]
        new = after.models[self.app_label, op.model_name_lower].fields[op.name]
        old_column, new_column = column_of(op.name, old), column_of(op.name, new)
        if old_column != new_column and old_column in self.baseline[table]:
            self.still_used(op, f"renames column {table}.{old_column}")
        if tightened := field_tightenings(old, new):
            self.contract(op, f"{table}.{old_column} {', '.join(tightened)}")
        if self.large(table):
            if index_build(old, new):
                self.long_lock(op, table, "an index on the column")
            if rewrites(old, new):
                self.long_lock(op, table, "a type change or NOT NULL")

    def remove_field(self, op: ops.RemoveField, before: ProjectState, after: ProjectState) -> None:
        table = table_of(before, self.app_label, op.model_name)
        field = before.models[self.app_label, op.model_name_lower].fields[op.name]
        if field.many_to_many:
            through = m2m_table(table, op.name, field)
            if through in self.baseline:
                self.still_used(op, f"drops table {through}")
        elif column_of(op.name, field) in self.baseline.get(table, ()):
            self.still_used(op, f"drops column {table}.{column_of(op.name, field)}")
        self.contract(op, f"drops a column of {table}")

    def rename_field(self, op: ops.RenameField, before: ProjectState, after: ProjectState) -> None:
        table = table_of(before, self.app_label, op.model_name)
        model = op.model_name.lower()
        old_column = column_of(op.old_name, before.models[self.app_label, model].fields[op.old_name])
        new_column = column_of(op.new_name, after.models[self.app_label, model].fields[op.new_name])
        if old_column == new_column:
            return  # the column keeps its name (db_column): nothing changes in the database
        if old_column in self.baseline.get(table, ()):
            self.still_used(op, f"renames column {table}.{old_column} to {new_column}")
        self.contract(op, f"renames a column of {table}")

    def delete_model(self, op: ops.DeleteModel, before: ProjectState, after: ProjectState) -> None:
        table = table_of(before, self.app_label, op.name)
        if table in self.baseline:
            self.still_used(op, f"drops table {table}")
        self.contract(op, f"drops table {table}")

    def rename_table(self, op: ops.RenameModel | ops.AlterModelTable, before: ProjectState, after: ProjectState) -> None:
        old_name = op.old_name if isinstance(op, ops.RenameModel) else op.name
        new_name = op.new_name if isinstance(op, ops.RenameModel) else op.name
        old_table, new_table = table_of(before, self.app_label, old_name), table_of(after, self.app_label, new_name)
        if old_table == new_table:
            return  # the table keeps its name (db_table): nothing changes in the database
        if old_table in self.baseline:
            self.still_used(op, f"renames table {old_table} to {new_table}")
        self.contract(op, f"renames table {old_table}")

    def add_constraint(self, op: ops.AddConstraint, before: ProjectState, after: ProjectState) -> None:
        table = self.old_table(before, op.model_name)
        if table is None:
            return
        self.contract(op, f"{type(op.constraint).__name__} {op.constraint.name} on {table}: rows N−1 writes may "
                      "violate it (N−1 does not check it)")
        if self.large(table):
            self.long_lock(op, table, f"validating {op.constraint.name}")

    def alter_unique_together(self, op: ops.AlterUniqueTogether, before: ProjectState, after: ProjectState) -> None:
        table = self.old_table(before, op.name)
        old = set(before.models[self.app_label, op.name_lower].options.get("unique_together", ()))
        added = set(after.models[self.app_label, op.name_lower].options.get("unique_together", ())) - old
        if table is None or not added:
            return
        self.contract(op, f"unique_together {sorted(added)} on {table}: rows N−1 writes may violate it")
        if self.large(table):
            self.long_lock(op, table, "a unique index")

    def alter_order(self, op: ops.AlterOrderWithRespectTo, before: ProjectState, after: ProjectState) -> None:
        table = self.old_table(before, op.name)
        if table is None:
            return
        if op.order_with_respect_to:
            self.refuse(op, "not-null-column", f"adds {table}._order NOT NULL without a database default")
        else:
            self.still_used(op, f"drops column {table}._order")
            self.contract(op, f"drops {table}._order")

    def code_step(self, op: ops.RunPython | ops.RunSQL, before: ProjectState, after: ProjectState) -> None:
        if not op.reversible:
            self.refuse(op, "code-step", "irreversible: give it reverse code (RunPython.noop when nothing is to undo)")
        if not {"DATA_STEP", "CONTRACT"} & self.markers.keys():
            self.refuse(op, "code-step", "runs while N−1 writes: mark the migration DATA_STEP = \"what N−1 "
                        "writes meanwhile and why that is fine\" (or CONTRACT)")

    def harmless(self, op: ops.base.Operation, before: ProjectState, after: ProjectState) -> None:
        """Nothing N−1 notices: a new table, an index or constraint dropped or renamed."""

    #: Which rule checks an operation: the first whose kinds it is an instance of.
    RULES: tuple[tuple[type | tuple[type, ...], Callable[..., None]], ...] = (
        (ops.AddIndex, add_index),
        (HARMLESS, harmless),
        (ops.AddField, add_field),
        (ops.AlterField, alter_field),
        (ops.RemoveField, remove_field),
        (ops.RenameField, rename_field),
        (ops.DeleteModel, delete_model),
        ((ops.RenameModel, ops.AlterModelTable), rename_table),
        (ops.AddConstraint, add_constraint),
        (ops.AlterUniqueTogether, alter_unique_together),
        (ops.AlterOrderWithRespectTo, alter_order),
        ((ops.RunPython, ops.RunSQL), code_step),
    )


def check_migration(migration: Migration, state: ProjectState, baseline: ProjectState,
                    markers: dict[str, str] | None = None) -> tuple[list[Problem], ProjectState]:
    """The problems of one migration applied to ``state``, and the state after it."""
    checker = Checker(migration, baseline, markers_of(migration) if markers is None else markers)
    for op in migration.operations:
        after = state.clone()
        op.state_forwards(migration.app_label, after)
        checker.check(op, state, after)
        state = after
    return checker.problems, state


def check_release(loader: MigrationLoader, baseline: dict[str, str] | None = None) -> tuple[list[Migration], list[Problem]]:
    """Every migration after the baseline, checked in the order ``migrate`` applies them."""
    state = old = baseline_state(loader, baseline)
    plan, problems = migrations_after(loader, baseline), []
    for migration in plan:
        found, state = check_migration(migration, state, old)
        problems += found
    return plan, problems


# --- PostgreSQL's locks, from the SQL ----------------------------------------------------

_TABLE = r'"?(?P<table>\w+)"?'
LOCKING_SQL = [
    (re.compile(rf"^\s*CREATE\s+(UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY\b)(IF\s+NOT\s+EXISTS\s+)?\"?\w+\"?\s+ON\s+(ONLY\s+)?{_TABLE}",
                re.I), "CREATE INDEX without CONCURRENTLY blocks writes while it builds"),
    (re.compile(rf"^\s*ALTER\s+TABLE\s+(ONLY\s+)?{_TABLE}\s.*\bADD\s+CONSTRAINT\s+\"?\w+\"?\s+(UNIQUE|PRIMARY\s+KEY|EXCLUDE)\b",
                re.I | re.S), "a unique constraint builds its index under a write lock"),
    (re.compile(rf"^\s*ALTER\s+TABLE\s+(ONLY\s+)?{_TABLE}\s.*\bADD\s+CONSTRAINT\s+\"?\w+\"?\s+CHECK\b(?!.*\bNOT\s+VALID\b)",
                re.I | re.S), "a CHECK constraint without NOT VALID scans the table under a write lock"),
    (re.compile(rf"^\s*ALTER\s+TABLE\s+(ONLY\s+)?{_TABLE}\s.*\bADD\s+COLUMN\b.*\b(UNIQUE|PRIMARY\s+KEY)\b", re.I | re.S),
     "a unique column builds its index under a write lock"),
    (re.compile(rf"^\s*ALTER\s+TABLE\s+(ONLY\s+)?{_TABLE}\s.*\bALTER\s+COLUMN\s+\"?\w+\"?\s+(SET\s+DATA\s+)?TYPE\b",
                re.I | re.S), "a type change rewrites the table under an ACCESS EXCLUSIVE lock"),
    (re.compile(rf"^\s*ALTER\s+TABLE\s+(ONLY\s+)?{_TABLE}\s.*\bSET\s+NOT\s+NULL\b", re.I | re.S),
     "SET NOT NULL scans the table under an ACCESS EXCLUSIVE lock"),
]


def lock_hazards(statements: Iterable[str], tables: Iterable[str]) -> list[str]:
    """Statements that block writes to one of ``tables`` (the large ones N−1 uses) for as
    long as PostgreSQL scans, builds or rewrites."""
    tables = set(tables)
    found = []
    for sql in statements:
        for pattern, why in LOCKING_SQL:
            match = pattern.search(str(sql))
            if match and match["table"] in tables:
                found.append(f"{why}: {' '.join(str(sql).split())[:200]}")
    return found


# --- release N−1's ORM code on the new schema ---------------------------------------------

#: Per-model values the generic ones cannot satisfy ("app_label.modelname" → field → value
#: from the row's serial number). No model has a CHECK constraint or a JSON shape the
#: database enforces, and unique fields get serial-numbered values; add an entry only for
#: what the database enforces, and say why.
HINTS: dict[str, dict[str, Callable[[int], Any]]] = {
    # The one row is created by scheduling.0001 with an explicit pk=1, so PostgreSQL's id
    # sequence still starts at 1; the code only ever reads and bumps that row, never inserts.
    "scheduling.schedulingconfigversion": {"id": lambda n: 1_000_000 + n},
}

START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

#: Tables N−1 only inserts into and reads: the database refuses an UPDATE or DELETE of their rows
#: (a trigger), so the old code is not asked to. model label → why.
APPEND_ONLY = {
    "core.objectchange": "the audit log (core/migrations/0005): entries are inserted, read and only expired by "
                         "the retention task (core.audit.expire)",
}


class OldCode:
    """What N−1's ORM code does, done with N−1's (historical) model classes: insert a row of
    every model, read it back with every column the old model selects, update every column,
    add to its many-to-many, delete it. Run against the new schema, any column, table or
    constraint N−1 cannot live with shows up as the failing statement."""

    def __init__(self, apps, hints: dict[str, dict[str, Callable[[int], Any]]] | None = None):
        self.apps = apps
        self.hints = HINTS if hints is None else hints
        self.serial = itertools.count(1)
        self.rows: dict[type[models.Model], models.Model] = {}
        self.created: list[models.Model] = []
        self.creating: set[type[models.Model]] = set()
        self.broken: dict[type[models.Model], str] = {}
        self.problems: list[str] = []
        self.exercised: list[str] = []

    def models(self) -> list[type[models.Model]]:
        return [m for m in self.apps.get_models() if m._meta.managed and not m._meta.proxy]

    def run(self) -> OldCode:
        for model in self.models():
            self.exercise(model)
        for obj in reversed(self.created):
            if obj._meta.label_lower not in APPEND_ONLY:
                self.step(type(obj), "DELETE", lambda o=obj: self.delete(o))
        return self

    # Values.
    def scalar(self, model: type[models.Model], field: models.Field, n: int) -> Any:
        hint = self.hints.get(model._meta.label_lower, {}).get(field.name)
        if hint is not None:
            return hint(n)
        if field.choices:
            values = [value for value, _ in field.flatchoices]
            return values[n % len(values)]
        if isinstance(field, models.BooleanField):
            return field.get_default() if field.has_default() else False
        if isinstance(field, models.JSONField):
            return {"compat": n, "list": [n]}
        if isinstance(field, models.EmailField):
            return f"compat{n}@example.com"
        if isinstance(field, models.URLField):
            return f"https://example.com/compat/{n}"
        if isinstance(field, models.GenericIPAddressField):
            return f"192.0.2.{n % 250 + 1}"
        if isinstance(field, models.UUIDField):
            return uuid.UUID(int=n)
        if isinstance(field, models.CharField):  # SlugField too
            return f"c{n}"[: field.max_length] if field.max_length else f"compat-{n}"
        if isinstance(field, models.TextField):
            return f"compat text {n}"
        if isinstance(field, models.DecimalField):
            return decimal.Decimal(n % 10).scaleb(0) + decimal.Decimal(1).scaleb(-field.decimal_places)
        if isinstance(field, models.FloatField):
            return n + 0.5
        if isinstance(field, models.IntegerField):  # every integer size, positive ones too
            return n
        if isinstance(field, models.DateTimeField):
            return START + dt.timedelta(minutes=n)
        if isinstance(field, models.DateField):
            return START.date() + dt.timedelta(days=n)
        if isinstance(field, models.TimeField):
            return dt.time(12, n % 60)
        if isinstance(field, models.DurationField):
            return dt.timedelta(seconds=n)
        if isinstance(field, models.BinaryField):
            return f"compat {n}".encode()
        raise TypeError(f"no value for {type(field).__name__} {field.name}: add one to HINTS")

    def values(self, model: type[models.Model], n: int, *, update: bool = False) -> dict[str, Any]:
        values = {}
        hinted = self.hints.get(model._meta.label_lower, {})
        for field in model._meta.concrete_fields:
            if field.generated or (update and field.primary_key):
                continue
            if isinstance(field, models.AutoField) and field.name not in hinted:
                continue
            if field.is_relation:
                if not update:
                    values[field.name] = self.target(field)
                elif field.null and not field.one_to_one and field.related_model in self.rows.keys() - {model}:
                    values[field.name] = self.rows[field.related_model]  # a key left empty at first
                continue
            values[field.attname] = self.scalar(model, field, n)
        return values

    def target(self, field: models.ForeignKey) -> models.Model | None:
        target = field.related_model
        if field.null and target not in self.rows and (target in self.creating or self.requires(target, self.creating)):
            return None  # a cycle through a nullable key (a parent, a current revision): the UPDATE sets it
        return self.create(target) if field.one_to_one else self.row(target)

    def requires(self, model: type[models.Model], others: set[type[models.Model]], seen=None) -> bool:
        """Whether a row of ``model`` needs (through NOT NULL keys) a row of one of ``others``."""
        seen = set() if seen is None else seen
        seen.add(model)
        for field in model._meta.concrete_fields:
            if field.is_relation and not field.null:
                target = field.related_model
                if target in others or (target not in seen and self.requires(target, others, seen)):
                    return True
        return False

    # Rows.
    def row(self, model: type[models.Model]) -> models.Model:
        """The one shared row of a model that others point to."""
        if model not in self.rows:
            self.rows[model] = self.create(model)
        return self.rows[model]

    def create(self, model: type[models.Model]) -> models.Model:
        if model in self.broken:
            raise LookupError(f"needs a {model._meta.label} row, whose INSERT failed")
        if model in self.creating:
            raise LookupError(f"a cycle of required keys through {model._meta.label}: add a hint")
        self.creating.add(model)
        try:
            obj = model(**self.values(model, next(self.serial)))
            obj.save(force_insert=True)
        finally:
            self.creating.discard(model)
        self.created.append(obj)
        return obj

    def step(self, model: type[models.Model], what: str, action: Callable[[], None]) -> bool:
        created, rows = len(self.created), dict(self.rows)
        try:
            with transaction.atomic():
                action()
            return True
        except Exception as exc:  # noqa: BLE001 — every failure is a finding
            del self.created[created:]  # rolled back with the savepoint
            self.rows = rows
            self.problems.append(f"{model._meta.label}: {what}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
            return False

    def read_back(self, obj: models.Model) -> None:
        model = type(obj)
        fetched = model._base_manager.get(pk=obj.pk)  # SELECT every column of the old model
        for field in model._meta.concrete_fields:
            wrote, read = getattr(obj, field.attname), getattr(fetched, field.attname)
            if wrote != read:
                raise AssertionError(f"{field.name}: wrote {wrote!r}, read {read!r}")

    def exercise(self, model: type[models.Model]) -> None:
        label = model._meta.label
        self.exercised.append(model._meta.label_lower)
        holder: dict[str, models.Model] = {}

        def insert() -> None:
            holder["obj"] = self.row(model)

        if not self.step(model, "INSERT", insert):
            self.broken[model] = label
            return
        obj = holder["obj"]
        self.step(model, "SELECT", lambda: self.read_back(obj))
        if model._meta.label_lower in APPEND_ONLY:
            return

        def update() -> None:
            for name, value in self.values(model, next(self.serial), update=True).items():
                setattr(obj, name, value)
            obj.save()
            self.read_back(obj)

        self.step(model, "UPDATE", update)
        for m2m in model._meta.local_many_to_many:
            if m2m.remote_field.through._meta.auto_created:
                def add(m2m=m2m) -> None:
                    other = self.row(m2m.related_model)
                    getattr(obj, m2m.name).add(other)
                    assert list(getattr(obj, m2m.name).filter(pk=other.pk)) == [other]
                self.step(model, f"many-to-many {m2m.name}", add)

    @staticmethod
    def delete(obj: models.Model) -> None:
        model = type(obj)
        model._base_manager.filter(pk=obj.pk).delete()  # the old model's cascade, with its SELECTs
        if model._base_manager.filter(pk=obj.pk).exists():
            raise AssertionError("the row is still there")

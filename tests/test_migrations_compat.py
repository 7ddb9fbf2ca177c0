"""Rolling upgrades are safe: release N−1 keeps working against release N's schema.

The migration Job applies release N's migrations while N−1's pods still serve, so every
migration after the release baseline (``config/release.py``) must be an expand step, and
contract steps wait a release (docs/upgrades.md). The static check reads the operations,
the dynamic one drives N−1's own (historical) models against the migrated database, and on
PostgreSQL the SQL the migrations send is scanned for long write locks on fleet-scale tables.
The rules' tests build migrations in memory against release 0.1.0's state (fixed, so they do
not move when the baseline does): no bad migration is ever committed.
"""

from __future__ import annotations

import io
import runpy

import pytest
from django.contrib.postgres.operations import AddIndexConcurrently as PostgresAddIndexConcurrently
from django.core.management import call_command
from django.db import NotSupportedError, connection, migrations, models, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ModelState, ProjectState
from django.db.models.functions import Now, Random

from config import release
from core.migration_ops import AddIndexConcurrently, DropIndex
from tests import migration_compat as compat

POSTGRES = connection.vendor == "postgresql"
needs_postgres = pytest.mark.skipif(not POSTGRES, reason="PostgreSQL's locks and SQL")

#: Release 0.1.0, the first baseline: the rule tests' fixed ground.
RELEASE_0_1 = {
    "admin": "0003_logentry_add_action_flag_choices", "auth": "0012_alter_user_first_name_max_length",
    "axes": "0010_accessattemptexpiration", "contenttypes": "0002_remove_content_type_name",
    "core": "0003_consolidation", "federation": "0004_water_level_rollups", "fleet": "0004_encrypted_credentials",
    "nodeconfig": "0003_restore_progress", "quotas": "0004_quotagroup_level", "scheduling": "0002_cpu_colocation",
    "sessions": "0001_initial",
}


@pytest.fixture(scope="module")
def loader():
    return compat.load()


@pytest.fixture(scope="module")
def state_0_1(loader) -> ProjectState:
    return compat.baseline_state(loader, RELEASE_0_1)


def migration(app_label: str, *operations, atomic: bool = True) -> migrations.Migration:
    built = migrations.Migration("0999_compat_case", app_label)
    built.operations = list(operations)
    built.atomic = atomic
    return built


def problems(state, app_label: str, *operations, atomic: bool = True, baseline=None, **markers) -> list[str]:
    """The rules' verdict on a migration of ``operations`` after ``state``: its rule codes."""
    found, _ = compat.check_migration(migration(app_label, *operations, atomic=atomic), state,
                                      state if baseline is None else baseline, markers)
    return [p.rule for p in found]


CONTRACT = {"CONTRACT": "code stopped reading it; the expand shipped in release 0.1.0"}


# --- the baseline --------------------------------------------------------------------------


def test_the_baseline_names_one_existing_migration_per_app(loader):
    """A baseline naming a migration that does not exist (renamed, squashed away) would make
    every later check meaningless."""
    nodes = compat.baseline_nodes(loader.graph)
    apps = {app for app, _ in loader.graph.nodes}
    assert {app for app, _ in nodes} <= apps
    assert len({app for app, _ in nodes}) == len(nodes)


def test_release_baseline_writes_every_apps_latest_migration(loader, tmp_path):
    """``manage.py release_baseline <release>`` is how the baseline moves at release time."""
    output, said = tmp_path / "release.py", io.StringIO()
    call_command("release_baseline", "9.9.9", output=str(output), stdout=said)
    assert "release 9.9.9" in said.getvalue()
    written = runpy.run_path(str(output))
    assert written["RELEASE"] == "9.9.9"
    assert written["BASELINE"] == {app: name for app, name in sorted(loader.graph.leaf_nodes())}
    assert written["REVIEWED"] == {}
    assert compat.migrations_after(loader, written["BASELINE"]) == []


def test_migrations_after_the_baseline_follow_the_graph(loader):
    """Moving the baseline back puts exactly the migrations in between after it, each after
    the migrations it depends on, as migrate applies them."""
    earlier = dict(RELEASE_0_1, quotas="0003_cashsample_burned", federation="0003_consolidation")
    after = [(m.app_label, m.name) for m in compat.migrations_after(loader, earlier)]
    later = [(m.app_label, m.name) for m in compat.migrations_after(loader, RELEASE_0_1)]
    assert set(after) == {("federation", "0004_water_level_rollups"), ("quotas", "0004_quotagroup_level")} | set(later)
    for position, node in enumerate(after):
        assert not set(loader.graph.node_map[node].parents) & set(after[position:]), node


# --- static: every migration after the baseline is an expand step ---------------------------


def test_every_migration_after_the_baseline_is_an_expand_step(loader):
    """The rules (docs/upgrades.md) over the next release's migrations, in migrate's order."""
    plan, found = compat.check_release(loader)
    checked = [f"{m.app_label}.{m.name}" for m in plan]
    assert [str(p) for p in found] == [], f"checked {checked}"


def test_the_rules_would_have_refused_contract_steps_of_release_0_1(loader):
    """The rules against real history: migrations written before the rules existed, checked
    as if each had come right after a baseline. Python-only defaults (N−1's INSERTs fail on
    NOT NULL), an unmarked backfill, a column re-encoded in place (N−1 would read ciphertext),
    a foreign key's index built under a lock on the per-node table."""
    def verdict(app_label, name):
        state = loader.project_state((app_label, name), at_end=False)
        found, _ = compat.check_migration(loader.graph.nodes[app_label, name], state, state)
        return sorted({p.rule for p in found})

    assert verdict("quotas", "0003_cashsample_burned") == ["not-null-column"]
    assert verdict("quotas", "0004_quotagroup_level") == ["code-step", "not-null-column"]
    assert verdict("fleet", "0004_encrypted_credentials") == ["code-step", "contract-unmarked"]
    assert verdict("core", "0003_consolidation") == ["not-null-column"]
    assert verdict("nodeconfig", "0003_restore_progress") == ["long-lock"]  # nullable, but indexed
    assert verdict("federation", "0004_water_level_rollups") == []  # a new table


def test_a_job_waiting_migration_as_expand_steps_passes(state_0_1):
    """core.0004_job_waiting as written for the release after 0.1.0: a column with a database
    default, a new choice, the new partial index before the old one goes (core_job is small)."""
    assert problems(
        state_0_1, "core",
        migrations.AddField("job", "waiting_for", models.CharField(blank=True, db_default="", default="", max_length=300)),
        migrations.AlterField("job", "status", models.CharField(
            choices=[("pending", "Pending"), ("waiting", "Waiting"), ("running", "Running"), ("succeeded", "Succeeded"),
                     ("failed", "Failed"), ("canceled", "Canceled")], db_index=True, default="pending", max_length=16)),
        migrations.AddIndex("job", models.Index(condition=models.Q(status__in=["pending", "waiting", "running"]),
                                                fields=["status", "created"], name="core_job_unfinished_idx")),
        migrations.RemoveIndex("job", "core_job_open_idx"),
    ) == []


def test_a_new_column_needs_null_or_a_database_default(state_0_1):
    """N−1's INSERT names only the columns it knows: a NOT NULL column needs the database to
    fill it. A Python default does not count: Django drops it from the column after filling
    the existing rows."""
    assert problems(state_0_1, "core", migrations.AddField("job", "owner", models.CharField(max_length=50, default="x"))) \
        == ["not-null-column"]
    assert problems(state_0_1, "core", migrations.AddField("job", "owner", models.CharField(max_length=50, null=True))) == []
    assert problems(state_0_1, "core", migrations.AddField("job", "owner", models.CharField(max_length=50, db_default="x"))) == []
    assert problems(state_0_1, "core", migrations.AddField("job", "seen", models.DateTimeField(db_default=Now()))) == []
    assert problems(state_0_1, "quotas", migrations.AddField("quotagroup", "watchers", models.ManyToManyField("auth.user"))) == []
    assert problems(state_0_1, "core", migrations.AlterOrderWithRespectTo("job", "user")) == ["not-null-column"]  # _order
    # A table of this release: N−1 never writes it.
    assert problems(state_0_1, "core",
                    migrations.CreateModel("Lease", [("id", models.BigAutoField(primary_key=True))]),
                    migrations.AddField("lease", "holder", models.CharField(max_length=50))) == []


def test_a_new_column_on_a_fleet_scale_table_builds_no_index_under_a_lock(state_0_1):
    """On fleet_node an indexed column (a foreign key's default index too) is built while
    N−1's syncs wait; db_index=False then AddIndexConcurrently builds it without blocking."""
    key = models.ForeignKey("fleet.cluster", null=True, on_delete=models.SET_NULL, related_name="+")
    assert problems(state_0_1, "fleet", migrations.AddField("node", "origin", key)) == ["long-lock"]
    assert problems(state_0_1, "fleet", migrations.AddField("node", "rack", models.CharField(max_length=50, null=True,
                                                                                             db_index=True))) == ["long-lock"]
    assert problems(state_0_1, "fleet", migrations.AddField("node", "origin", models.ForeignKey(
        "fleet.cluster", null=True, on_delete=models.SET_NULL, related_name="+", db_index=False))) == []
    assert problems(state_0_1, "fleet", migrations.AddField("node", "origin", key), LONG_LOCK="maintenance window") == []
    # A volatile database default is computed per row: PostgreSQL rewrites the table.
    assert problems(state_0_1, "fleet", migrations.AddField("node", "jitter", models.FloatField(db_default=Random()))) \
        == ["long-lock"]
    assert problems(state_0_1, "fleet", migrations.AddField("node", "seen", models.DateTimeField(db_default=Now()))) == []
    # A small table: milliseconds.
    assert problems(state_0_1, "core", migrations.AddField("job", "origin", models.ForeignKey(
        "fleet.cluster", null=True, on_delete=models.SET_NULL, related_name="+"))) == []


@pytest.mark.parametrize("new_field", [
    models.CharField(max_length=16, db_index=True, default="pending", choices=[
        ("pending", "P"), ("running", "R"), ("succeeded", "S"), ("failed", "F"), ("canceled", "C"), ("waiting", "W")]),
    models.CharField(max_length=40, db_index=True, default="pending", choices=[
        ("pending", "P"), ("running", "R"), ("succeeded", "S"), ("failed", "F"), ("canceled", "C")]),
    models.CharField(max_length=16, db_index=True, null=True, default="pending", choices=[
        ("pending", "P"), ("running", "R"), ("succeeded", "S"), ("failed", "F"), ("canceled", "C")]),
    models.CharField(max_length=16, db_index=True, db_default="pending", choices=[
        ("pending", "P"), ("running", "R"), ("succeeded", "S"), ("failed", "F"), ("canceled", "C")]),
    models.CharField(max_length=16, db_index=False, help_text="relabelled", verbose_name="state"),
], ids=["adds-a-choice", "longer", "nullable", "database-default", "no-choices-no-index"])
def test_altering_a_column_that_only_relaxes_passes(state_0_1, new_field):
    assert problems(state_0_1, "core", migrations.AlterField("job", "status", new_field)) == []


CHOICES = [("pending", "P"), ("running", "R"), ("succeeded", "S"), ("failed", "F"), ("canceled", "C")]


@pytest.mark.parametrize("new_field, unmarked, marked", [
    (models.CharField(max_length=8, db_index=True, default="pending", choices=CHOICES), ["contract-unmarked"], []),
    (models.CharField(max_length=16, db_index=True, default="pending", choices=CHOICES[:4]), ["contract-unmarked"], []),
    (models.CharField(max_length=16, db_index=True, unique=True, default="pending"), ["contract-unmarked"], []),
    (models.TextField(db_index=True, default="pending"), ["contract-unmarked"], []),
    (models.CharField(max_length=16, db_index=True, default="pending", choices=CHOICES, db_column="state"),
     ["removes-used"], ["removes-used"]),
], ids=["shorter", "drops-a-choice", "unique", "type", "column-renamed"])
def test_altering_a_column_that_tightens_is_a_contract_step(state_0_1, new_field, unmarked, marked):
    """What N−1 writes may no longer fit: allowed only as a marked contract step, a release
    after N−1 stopped writing it. A renamed column never: N−1 selects it by its old name."""
    assert problems(state_0_1, "core", migrations.AlterField("job", "status", new_field)) == unmarked
    assert problems(state_0_1, "core", migrations.AlterField("job", "status", new_field), **CONTRACT) == marked


def test_making_a_column_not_null_is_a_contract_step(state_0_1):
    tightened = models.DateTimeField(help_text="When the task message was last sent.")
    assert problems(state_0_1, "core", migrations.AlterField("job", "dispatched", tightened)) == ["contract-unmarked"]
    assert problems(state_0_1, "core", migrations.AlterField("job", "dispatched", tightened), **CONTRACT) == []
    assert problems(state_0_1, "core", migrations.AlterField("job", "dispatched", tightened),
                    CONTRACT="nobody writes NULL any more") == ["contract-unmarked"]  # names no release
    # On a fleet-scale table the marker does not shorten the scan under the lock.
    assert problems(state_0_1, "fleet", migrations.AlterField("node", "cpu_usage_milli", models.BigIntegerField()),
                    **CONTRACT) == ["long-lock"]


def test_removing_or_renaming_what_release_n_minus_1_reads_is_refused_even_marked(state_0_1):
    """N−1's models select every column and table they declare: dropping one breaks every
    query N−1 makes on the table, whatever the migration says."""
    for op in (migrations.RemoveField("job", "log"), migrations.RenameField("job", "log", "output"),
               migrations.DeleteModel("objectchange"), migrations.RenameModel("objectchange", "auditentry"),
               migrations.AlterModelTable("objectchange", "core_audit")):
        assert "removes-used" in problems(state_0_1, "core", op, **CONTRACT), op
        assert "contract-unmarked" in problems(state_0_1, "core", op), op


def test_a_rename_that_keeps_the_column_or_table_changes_nothing(state_0_1):
    keeps_column = problems(state_0_1, "core",
                            migrations.AlterField("job", "log", models.TextField(blank=True, db_column="log")),
                            migrations.RenameField("job", "log", "output"))
    assert keeps_column == []
    assert problems(state_0_1, "core", migrations.AlterModelTable("objectchange", "core_objectchange"),
                    migrations.RenameModel("objectchange", "auditentry")) == []


def test_dropping_a_column_takes_two_releases(state_0_1):
    """Release K stops naming the column in its models only (SeparateDatabaseAndState), and
    makes it nullable so its own INSERTs, which leave it out, succeed; release K+1, with K as
    its baseline, puts the field back into the migration state and drops the column, marked."""
    stop_naming = migrations.SeparateDatabaseAndState(
        database_operations=[migrations.AlterField("job", "log", models.TextField(blank=True, null=True))],
        state_operations=[migrations.RemoveField("job", "log")])
    assert problems(state_0_1, "core", stop_naming) == []
    assert problems(state_0_1, "core", migrations.SeparateDatabaseAndState(
        state_operations=[migrations.RemoveField("job", "log")])) == ["orphan-column"]  # still NOT NULL

    release_k = state_0_1.clone()
    stop_naming.state_forwards("core", release_k)
    drop = (migrations.SeparateDatabaseAndState(state_operations=[
        migrations.AddField("job", "log", models.TextField(blank=True, null=True))]), migrations.RemoveField("job", "log"))
    assert problems(release_k, "core", *drop, baseline=release_k, **CONTRACT) == []
    assert problems(release_k, "core", *drop, baseline=release_k) == ["contract-unmarked"]
    # The same drop a release early, while the baseline's models still name the column.
    assert problems(state_0_1, "core", drop[1], **CONTRACT) == ["removes-used"]


def test_dropping_a_table_takes_two_releases(state_0_1):
    """As a column: release K drops the model from its state only; release K+1 puts it back
    into the migration state and drops the table, marked."""
    stop_naming = migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel("objectchange")])
    assert problems(state_0_1, "core", stop_naming) == []
    release_k = state_0_1.clone()
    stop_naming.state_forwards("core", release_k)
    audit = state_0_1.models["core", "objectchange"]
    drop = (migrations.SeparateDatabaseAndState(state_operations=[
        migrations.CreateModel(audit.name, list(audit.fields.items()), options=audit.options)]),
        migrations.DeleteModel("objectchange"))
    assert problems(release_k, "core", *drop, baseline=release_k, **CONTRACT) == []
    assert problems(release_k, "core", *drop, baseline=release_k) == ["contract-unmarked"]
    assert problems(state_0_1, "core", drop[1], **CONTRACT) == ["removes-used"]


def test_separate_database_and_state_is_judged_by_its_database_operations(state_0_1):
    """A drop in database_operations is still a drop; a state-only removal of a nullable
    column changes nothing N−1 (or N) writes."""
    hidden = migrations.SeparateDatabaseAndState(database_operations=[migrations.RemoveField("job", "log")])
    assert problems(state_0_1, "core", hidden, **CONTRACT) == ["removes-used"]
    state_only = migrations.SeparateDatabaseAndState(state_operations=[migrations.RemoveField("job", "dispatched")])
    assert problems(state_0_1, "core", state_only) == []


def test_a_new_unique_or_check_constraint_is_a_contract_step(state_0_1):
    """N−1 writes rows without knowing the constraint: they may violate it."""
    unique = models.UniqueConstraint(fields=["task_id"], name="core_job_task_once")
    check = models.CheckConstraint(condition=models.Q(attempts__lte=100), name="core_job_attempts_bounded")
    for constraint in (unique, check):
        assert problems(state_0_1, "core", migrations.AddConstraint("job", constraint)) == ["contract-unmarked"]
        assert problems(state_0_1, "core", migrations.AddConstraint("job", constraint), **CONTRACT) == []
    assert problems(state_0_1, "core", migrations.AlterUniqueTogether("job", {("kind", "task_id")})) == ["contract-unmarked"]
    # On a fleet-scale table it is also validated under a lock.
    node_unique = models.UniqueConstraint(fields=["cluster", "uid"], name="fleet_node_uid_once")
    assert problems(state_0_1, "fleet", migrations.AddConstraint("node", node_unique), **CONTRACT) == ["long-lock"]
    # A table of this release, or dropping a constraint: nothing N−1 writes is at stake.
    assert problems(state_0_1, "core",
                    migrations.CreateModel("Lease", [("id", models.BigAutoField(primary_key=True)),
                                                     ("name", models.CharField(max_length=50))]),
                    migrations.AddConstraint("lease", models.UniqueConstraint(fields=["name"], name="core_lease_once"))) == []
    assert problems(state_0_1, "fleet", migrations.RemoveConstraint("node", "fleet_node_cluster_name")) == []


def test_an_index_on_a_fleet_scale_table_is_built_concurrently(state_0_1):
    """A plain CREATE INDEX holds every write to the table until it is built; on fleet_node
    that is N−1's inventory syncs. core.migration_ops.AddIndexConcurrently builds it without
    blocking (PostgreSQL) and works on SQLite too, where Django's own one fails."""
    index = models.Index(fields=["cluster", "kubelet_version"], name="fleet_node_kubelet_idx")
    assert problems(state_0_1, "fleet", migrations.AddIndex("node", index)) == ["long-lock"]
    assert problems(state_0_1, "fleet", AddIndexConcurrently("node", index), atomic=False) == []
    assert problems(state_0_1, "fleet", AddIndexConcurrently("node", index)) == ["concurrent-in-transaction"]
    assert problems(state_0_1, "fleet", PostgresAddIndexConcurrently("node", index), atomic=False) == ["postgres-only"]
    job_index = models.Index(fields=["kind", "created"], name="core_job_kind_idx")
    assert problems(state_0_1, "core", migrations.AddIndex("job", job_index)) == []  # core_job is small
    assert problems(state_0_1, "core", migrations.RemoveIndex("job", "core_job_open_idx")) == []


def test_dropping_an_index_the_state_never_named_passes(state_0_1):
    """A foreign key's own index, served by a composite index leading with its column: only
    the index goes, as RemoveIndex drops one (Django's AlterField would drop the foreign key
    and validate it again over every row)."""
    drop = DropIndex("fleet_pod", "fleet_pod_cluster_id_b32b8aab", '"cluster_id"')
    unindexed = migrations.AlterField("pod", "cluster", models.ForeignKey("fleet.cluster", on_delete=models.CASCADE,
                                                                           related_name="pods", db_index=False))
    assert problems(state_0_1, "fleet", migrations.SeparateDatabaseAndState(
        database_operations=[drop], state_operations=[unindexed])) == []


@pytest.mark.django_db(transaction=True)
def test_drop_index_drops_it_and_unapplied_builds_it_again():
    def names() -> set[str]:
        with connection.cursor() as cursor:
            return set(connection.introspection.get_constraints(cursor, "compat_drop_case"))

    with connection.schema_editor() as editor:
        editor.execute('CREATE TABLE "compat_drop_case" ("name" varchar(20))')
        editor.execute('CREATE INDEX "compat_drop_case_name" ON "compat_drop_case" ("name")')
    drop = DropIndex("compat_drop_case", "compat_drop_case_name", '"name"')
    try:
        with connection.schema_editor() as editor:
            drop.database_forwards("core", editor, None, None)
        assert "compat_drop_case_name" not in names()
        with connection.schema_editor() as editor:
            drop.database_backwards("core", editor, None, None)
        assert "compat_drop_case_name" in names()
    finally:
        with connection.schema_editor() as editor:
            editor.execute('DROP TABLE "compat_drop_case"')


def test_code_steps_are_reversible_and_say_why_they_are_safe(state_0_1):
    """A backfill runs while N−1 keeps writing rows it does not backfill: the migration says
    what N−1 writes meanwhile and why that is fine; and a release can be rolled back."""
    def backfill(apps, schema_editor):
        pass

    assert problems(state_0_1, "core", migrations.RunPython(backfill)) == ["code-step", "code-step"]
    assert problems(state_0_1, "core", migrations.RunPython(backfill), DATA_STEP="N−1 writes no row it misses") \
        == ["code-step"]
    assert problems(state_0_1, "core", migrations.RunPython(backfill, migrations.RunPython.noop)) == ["code-step"]
    assert problems(state_0_1, "core", migrations.RunPython(backfill, migrations.RunPython.noop),
                    DATA_STEP="N−1 writes no row it misses") == []
    assert problems(state_0_1, "core", migrations.RunSQL("UPDATE core_job SET log = ''")) == ["code-step", "code-step"]


def test_an_operation_without_a_rule_is_refused(state_0_1):
    class Vacuum(Operation):
        def state_forwards(self, app_label, state):
            pass

        def describe(self):
            return "vacuum"

    assert problems(state_0_1, "core", Vacuum()) == ["unknown-operation"]


def test_a_dependencys_migration_is_marked_in_the_release_file(state_0_1, monkeypatch):
    """A dependency's migration cannot carry a marker: config.release.REVIEWED holds it."""
    drop = migrations.Migration("0099_drop_log", "core")
    drop.operations = [migrations.RunPython(lambda apps, editor: None, migrations.RunPython.noop)]
    assert compat.markers_of(drop) == {}
    monkeypatch.setitem(release.REVIEWED, "core.0099_drop_log", {"DATA_STEP": "reviewed: touches no table"})
    assert compat.markers_of(drop) == {"DATA_STEP": "reviewed: touches no table"}
    assert compat.check_migration(drop, state_0_1, state_0_1)[0] == []


def test_the_large_tables_exist():
    """A misspelt or dropped table here would let a blocking index through unnoticed."""
    tables = {m._meta.db_table for m in compat.load().project_state().apps.get_models()}
    assert set(compat.LARGE_TABLES) - tables == set()


# --- dynamic: N−1's models read and write the migrated database ----------------------------


@pytest.mark.django_db
def test_release_n_minus_1_models_work_on_the_migrated_schema(loader):
    """The test database is migrated to the latest schema (release N); release N−1's models
    (the baseline's historical models) insert, read, update and delete a row of every model
    against it, as N−1's pods do during the upgrade."""
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == [], "the test database is not at the latest schema"
    old = compat.baseline_state(loader).apps
    run = compat.OldCode(old).run()
    assert run.problems == [], "\n".join(run.problems)
    expected = {m._meta.label_lower for m in old.get_models() if m._meta.managed and not m._meta.proxy}
    assert set(run.exercised) == expected and len(expected) > 40


def scratch_table(fields: dict[str, models.Field]) -> ProjectState:
    """Release N−1's state of a scratch model (id, name, size); the database gets release N's
    table for it, with ``fields`` besides the id."""
    old, new = ProjectState(), ProjectState()
    old.add_model(ModelState("compat_scratch", "Widget", [
        ("id", models.BigAutoField(primary_key=True)), ("name", models.CharField(max_length=20)),
        ("size", models.IntegerField(null=True))]))
    new.add_model(ModelState("compat_scratch", "Widget", [("id", models.BigAutoField(primary_key=True)), *fields.items()]))
    editor = connection.schema_editor()  # not entered: SQLite refuses that inside the test's transaction
    editor.execute(*editor.table_sql(new.apps.get_model("compat_scratch", "widget")))
    return old


def name():
    return models.CharField(max_length=20)


def size():
    return models.IntegerField(null=True)


@pytest.mark.django_db
@pytest.mark.parametrize("fields, failure", [
    pytest.param({"name": name(), "size": size(), "must": models.CharField(max_length=10, default="x")},
                 "INSERT: IntegrityError", id="not-null-python-default"),
    pytest.param({"name": name()}, "INSERT: OperationalError" if not POSTGRES else "INSERT: ProgrammingError",
                 id="dropped-column"),
    pytest.param({"name": name(), "size": size(), "must": models.CharField(max_length=10, null=True)}, None,
                 id="nullable"),
    pytest.param({"name": name(), "size": size(), "must": models.CharField(max_length=10, db_default="x")}, None,
                 id="database-default"),
])
def test_the_dynamic_check_catches_what_release_n_minus_1_cannot_write(fields, failure):
    """Proof the exercise bites: release N's table for a scratch model, release N−1's model
    class for it. A NOT NULL column without a database default fails N−1's INSERT (what the
    static not-null-column rule refuses), and so does a column N−1 still has but N dropped."""
    old = scratch_table(fields)
    run = compat.OldCode(old.apps).run()
    assert run.exercised == ["compat_scratch.widget"]
    if failure is None:
        assert run.problems == []
    else:
        assert len(run.problems) == 1 and run.problems[0].startswith(f"compat_scratch.Widget: {failure}"), run.problems
        assert ("must" if "must" in fields else "size") in run.problems[0]


# --- PostgreSQL: no long lock on a fleet-scale table ---------------------------------------


def test_the_lock_scan_flags_statements_that_block_writes():
    large = {"fleet_node"}
    flagged = [
        'CREATE INDEX "fleet_node_x_idx" ON "fleet_node" ("x")',
        'CREATE UNIQUE INDEX "fleet_node_x_uniq" ON "fleet_node" ("x") WHERE "x" IS NOT NULL',
        'ALTER TABLE "fleet_node" ADD CONSTRAINT "fleet_node_x_check" CHECK ("x" >= 0)',
        'ALTER TABLE "fleet_node" ADD CONSTRAINT "fleet_node_x_uniq" UNIQUE ("x")',
        'ALTER TABLE "fleet_node" ADD COLUMN "x" varchar(10) NULL UNIQUE',
        'ALTER TABLE "fleet_node" ALTER COLUMN "x" TYPE bigint USING "x"::bigint',
        'ALTER TABLE "fleet_node" ALTER COLUMN "x" SET NOT NULL',
    ]
    passed = [
        'CREATE INDEX CONCURRENTLY "fleet_node_x_idx" ON "fleet_node" ("x")',
        'ALTER TABLE "fleet_node" ADD COLUMN "x" varchar(10) DEFAULT \'\' NOT NULL',
        'ALTER TABLE "fleet_node" ADD CONSTRAINT "fleet_node_x_check" CHECK ("x" >= 0) NOT VALID',
        'DROP INDEX IF EXISTS "fleet_node_x_idx"',
        'CREATE INDEX "core_job_x_idx" ON "core_job" ("x")',
    ]
    assert [len(compat.lock_hazards([sql], large)) for sql in flagged] == [1] * len(flagged)
    assert compat.lock_hazards(passed, large) == []


@needs_postgres
@pytest.mark.django_db
def test_the_lock_scan_reads_djangos_own_sql(state_0_1):
    """The patterns match what Django's PostgreSQL schema editor writes for the operations
    the static rules refuse on fleet-scale tables, and let the accepted ones through."""
    def sql(*operations) -> list[str]:
        state = state_0_1.clone()
        with connection.schema_editor(collect_sql=True) as editor:
            for op in operations:
                after = state.clone()
                op.state_forwards("fleet", after)
                op.database_forwards("fleet", editor, state, after)
                state = after
        return editor.collected_sql

    large = set(compat.LARGE_TABLES)
    index = models.Index(fields=["cluster", "kubelet_version"], name="fleet_node_kubelet_idx")
    assert compat.lock_hazards(sql(migrations.AddIndex("node", index)), large)
    key = models.ForeignKey("fleet.cluster", null=True, on_delete=models.SET_NULL, related_name="+")
    assert compat.lock_hazards(sql(migrations.AddField("node", "origin", key)), large)
    assert compat.lock_hazards(sql(migrations.AlterField("node", "cpu_usage_milli", models.BigIntegerField())), large)
    assert compat.lock_hazards(sql(migrations.AddConstraint("node", models.CheckConstraint(
        condition=models.Q(name__gt=""), name="fleet_node_named"))), large)
    assert compat.lock_hazards(sql(migrations.AddField("node", "rack", models.CharField(max_length=50, db_default=""))),
                               large) == []
    assert compat.lock_hazards(sql(migrations.AddField("node", "origin", models.ForeignKey(
        "fleet.cluster", null=True, on_delete=models.SET_NULL, related_name="+", db_index=False))), large) == []


def applied_sql(targets) -> list[str]:
    """Migrate to ``targets``, returning every statement sent."""
    statements: list[str] = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    executor = MigrationExecutor(connection)
    with connection.execute_wrapper(record):
        executor.migrate(targets)
    return statements


@needs_postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_migrations_after_the_baseline_hold_no_long_lock(loader):
    """The SQL each migration after the baseline sends, captured by unapplying them and
    applying them again one by one (outside a transaction, as the migration Job does):
    nothing that blocks writes to a fleet-scale table N−1 uses for longer than a moment."""
    plan = compat.migrations_after(loader)
    if not plan:
        pytest.skip("no migration after the release baseline yet")
    old_tables = set(compat.schema_of(compat.baseline_state(loader))) & set(compat.LARGE_TABLES)
    baseline = dict(compat.baseline_nodes(loader.graph))
    leaves = sorted(loader.graph.leaf_nodes())
    found = []
    try:
        applied_sql([(app, baseline.get(app)) for app in sorted({app for app, _ in leaves})])
        for step in plan:
            if "LONG_LOCK" in compat.markers_of(step):
                applied_sql([(step.app_label, step.name)])
                continue
            found += [f"{step.app_label}.{step.name}: {hazard}"
                      for hazard in compat.lock_hazards(applied_sql([(step.app_label, step.name)]), old_tables)]
    finally:
        applied_sql(leaves)
    assert found == []


@pytest.mark.django_db(transaction=True)
def test_add_index_concurrently_builds_the_index_on_either_database(state_0_1):
    """core.migration_ops.AddIndexConcurrently on fleet_node: CREATE INDEX CONCURRENTLY on
    PostgreSQL (a valid index, and no statement the lock scan flags), a plain index on SQLite,
    and removed again backwards."""
    op = AddIndexConcurrently("node", models.Index(fields=["name", "cluster"], name="fleet_node_compat_idx"))
    after = state_0_1.clone()
    op.state_forwards("fleet", after)
    statements: list[str] = []

    def record(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    def indexes():
        with connection.cursor() as cursor:
            return connection.introspection.get_constraints(cursor, "fleet_node")

    with connection.execute_wrapper(record), connection.schema_editor(atomic=False) as editor:
        op.database_forwards("fleet", editor, state_0_1, after)
    try:
        assert "fleet_node_compat_idx" in indexes()
        if POSTGRES:
            assert any("CREATE INDEX CONCURRENTLY" in sql for sql in statements), statements
            assert compat.lock_hazards(statements, compat.LARGE_TABLES) == []
            with connection.cursor() as cursor:
                cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = 'fleet_node_compat_idx'::regclass")
                assert cursor.fetchone() == (True,)
            with pytest.raises(NotSupportedError), transaction.atomic(), connection.schema_editor() as editor:
                op.database_backwards("fleet", editor, after, state_0_1)
    finally:
        with connection.schema_editor(atomic=False) as editor:
            op.database_backwards("fleet", editor, after, state_0_1)
    assert "fleet_node_compat_idx" not in indexes()

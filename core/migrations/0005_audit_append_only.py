"""The audit log is append-only at the database too (PostgreSQL): a trigger refuses UPDATE and
DELETE on ``core_objectchange``, whoever sends them, except

- a DELETE inside the retention task's transaction, which sets ``meridian.audit_retention``
  with ``SET LOCAL`` (``core.audit.expire``);
- an UPDATE that only empties ``user_id`` / ``object_type_id``: the foreign keys' ON DELETE SET
  NULL when a user or a content type is deleted (the entry keeps the actor's name).

SQLite has no such trigger: there the ORM's guard (``core.models.ObjectChange``) is the
barrier, and no URL deletes or changes an entry on either database. TRUNCATE and a superuser
disabling triggers are the database owner's powers, outside the application's reach.

Expand-only: CREATE TRIGGER holds its lock for a moment and scans nothing.
"""

from django.db import migrations

DATA_STEP = ("creates the audit table's append-only trigger; release N-1 only inserts entries (allowed), and its "
             "retention task, which does not set meridian.audit_retention, is refused until N's beat runs it")

FUNCTION = """
CREATE OR REPLACE FUNCTION meridian_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('meridian.audit_retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE'
       AND (to_jsonb(NEW) - 'user_id' - 'object_type_id') = (to_jsonb(OLD) - 'user_id' - 'object_type_id')
       AND (NEW.user_id IS NULL OR NEW.user_id IS NOT DISTINCT FROM OLD.user_id)
       AND (NEW.object_type_id IS NULL OR NEW.object_type_id IS NOT DISTINCT FROM OLD.object_type_id) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % on core_objectchange refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'entries are deleted only by the retention task (core.audit.expire)';
END;
$$;
"""
TRIGGER = """
DROP TRIGGER IF EXISTS meridian_audit_append_only ON core_objectchange;
CREATE TRIGGER meridian_audit_append_only BEFORE UPDATE OR DELETE ON core_objectchange
    FOR EACH ROW EXECUTE FUNCTION meridian_audit_append_only();
"""
DROP = """
DROP TRIGGER IF EXISTS meridian_audit_append_only ON core_objectchange;
DROP FUNCTION IF EXISTS meridian_audit_append_only();
"""


def create_trigger(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION, params=None)
        schema_editor.execute(TRIGGER, params=None)


def drop_trigger(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):

    dependencies = [("core", "0004_job_waiting")]

    operations = [migrations.RunPython(create_trigger, drop_trigger)]

"""The database itself refuses to change or delete label history (PostgreSQL; the
model guards it elsewhere)."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION annotation_labelrevision_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'label history is append-only: annotation_labelrevision rows are never updated or deleted';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER annotation_labelrevision_append_only
    BEFORE UPDATE OR DELETE ON annotation_labelrevision
    FOR EACH ROW EXECUTE FUNCTION annotation_labelrevision_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS annotation_labelrevision_append_only ON annotation_labelrevision;
DROP FUNCTION IF EXISTS annotation_labelrevision_append_only();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]

"""API tokens kept as a keyed hash (exports.tokens): the ApiToken table, the
keys of DRF's authtoken table hashed into it (each keeps its owner and
creation time, so expiry is unchanged and the researchers' keys still work),
then that table, whose key column held every key as it is, dropped with its
migration records and content type (rest_framework.authtoken is no longer
installed)."""

import datetime

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

DRF_TABLE = "authtoken_token"


def drf_tokens_hash(apps, schema_editor):
    from exports.tokens import PREFIX_CHARS, token_digest

    connection = schema_editor.connection
    if DRF_TABLE not in connection.introspection.table_names():
        return  # a database made after the change
    ApiToken = apps.get_model("exports", "ApiToken")
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {qn('key')}, {qn('user_id')}, {qn('created')} FROM {qn(DRF_TABLE)}"
        )
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        if isinstance(created, str):  # SQLite without its converters
            created = datetime.datetime.fromisoformat(created)
        if django.utils.timezone.is_naive(created):
            created = django.utils.timezone.make_aware(created, datetime.UTC)
        ApiToken.objects.create(
            user_id=user_id,
            prefix=key[:PREFIX_CHARS],
            digest=token_digest(key),
            created=created,
        )
    schema_editor.execute(f"DROP TABLE {qn(DRF_TABLE)}")
    schema_editor.execute(
        f"DELETE FROM {qn('django_migrations')} WHERE {qn('app')} = %s", ["authtoken"]
    )
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="authtoken").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("exports", "0004_release_surveillance"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("prefix", models.CharField(db_index=True, max_length=8)),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_token",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"verbose_name": "API token"},
        ),
        # The keys cannot be recovered from their hashes: undoing this leaves
        # the new table's tokens behind, and DRF's table empty.
        migrations.RunPython(drf_tokens_hash, migrations.RunPython.noop),
    ]

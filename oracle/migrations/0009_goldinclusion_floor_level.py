"""GoldInclusion keeps the draw's uniform floor in a field of its own (issue
33), not only in its source text; rows drawn before read it back from that
text ("uniform floor 0.5"), else the default of the time, 0.7."""

import re

from django.db import migrations, models

FLOOR_TEXT = re.compile(r"uniform floor ([0-9.eE+-]+)")
# evaluation.ppi.DEFAULT_FLOOR when these rows were drawn.
FLOOR_THEN = 0.7


def floors_from_source(apps, schema_editor):
    GoldInclusion = apps.get_model("oracle", "GoldInclusion")
    rows = list(GoldInclusion.objects.only("pk", "source"))
    for row in rows:
        found = FLOOR_TEXT.search(row.source or "")
        try:
            floor = float(found.group(1)) if found else FLOOR_THEN
        except ValueError:
            floor = FLOOR_THEN
        row.floor = floor if 0 < floor <= 1 else FLOOR_THEN
    GoldInclusion.objects.bulk_update(rows, ["floor"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("oracle", "0008_gold_inclusion"),
    ]

    operations = [
        migrations.AddField(
            model_name="goldinclusion",
            name="level",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="The uncertainty's level (evaluation.ppi_active), whose "
                "second moment set the probability; empty for draws before levels.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="goldinclusion",
            name="floor",
            field=models.FloatField(null=True),
        ),
        migrations.RunPython(floors_from_source, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="goldinclusion",
            name="floor",
            field=models.FloatField(
                help_text="The share of the budget the draw spread uniformly: every "
                "window's probability is at least floor * budget / windows."
            ),
        ),
        migrations.AddConstraint(
            model_name="goldinclusion",
            constraint=models.CheckConstraint(
                condition=models.Q(("floor__gt", 0), ("floor__lte", 1)),
                name="gold_inclusion_floor_range",
            ),
        ),
    ]

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0007_agreement_recompute"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="evidence_required",
            field=models.BooleanField(
                default=True,
                help_text=(
                    "Each acute problem, added action and red flag must cite at "
                    "least one evidence event before the label can be submitted."
                ),
            ),
        ),
        migrations.AlterField(
            model_name="adjudicationdecision",
            name="action",
            field=models.CharField(
                choices=[
                    ("accept", "Accept the item"),
                    ("rewrite", "Rewrite the item"),
                    ("merge", "Merge matched items into one wording"),
                    ("drop", "Drop the item"),
                    ("settle_status", "Settle the status"),
                    ("request_third_rater", "Ask a third physician"),
                    ("drop_window", "Drop the window"),
                ],
                max_length=20,
            ),
        ),
    ]

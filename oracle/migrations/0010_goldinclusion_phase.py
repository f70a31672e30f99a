"""GoldInclusion gets the pilot's probability and each row's phase (issue
33): an active draw stores every pool window, pilot, active or not drawn, with
its probability of being in the Gold set, the union of pilot and active
draw. Rows drawn before were drawn windows: phase "active", no pilot."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("oracle", "0009_goldinclusion_floor_level"),
    ]

    operations = [
        migrations.AddField(
            model_name="goldinclusion",
            name="phase",
            field=models.CharField(
                choices=[
                    ("pilot", "labelled before the draw (the pilot)"),
                    ("active", "drawn by the active draw"),
                    ("none", "not drawn"),
                ],
                default="active",
                help_text="How the window came to be in the Gold set, or that it "
                "did not.",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="goldinclusion",
            name="pilot_probability",
            field=models.FloatField(
                blank=True,
                help_text="The pilot's probability for every window of the pool "
                "(its labelled windows over the pool's, counted as a uniform "
                "draw); empty when the pool had no labels before the draw.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="goldinclusion",
            name="probability",
            field=models.FloatField(
                help_text="The window's probability of being in the Gold set: of "
                "the pilot or the active draw."
            ),
        ),
    ]

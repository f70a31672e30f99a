# The online-evaluation protocol's context mode (issue 32): a stay's history
# streamed in a session (the default), or whole with every window.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_prediction_error_detail"),
    ]

    operations = [
        migrations.AddField(
            model_name="onlineendpoint",
            name="context_mode",
            field=models.CharField(
                choices=[
                    (
                        "streamed",
                        "Streamed: the history once, then each window's new events",
                    ),
                    ("full", "Whole: the whole history with every window"),
                ],
                default="streamed",
                max_length=10,
            ),
        ),
    ]

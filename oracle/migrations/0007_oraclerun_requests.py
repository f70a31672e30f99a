# The requests of an Oracle run as they happen (issue 32).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("oracle", "0006_oraclerun_attempts_oraclerun_heartbeat_at_and_more"),
    ]

    operations = [
        migrations.AddField(
            model_name="oraclerun",
            name="requests_sent",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="oraclerun",
            name="requests_answered",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="oraclerun",
            name="requests_timed_out",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="oraclerun",
            name="requests_errored",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="oraclerun",
            name="requests_retried",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="oraclerun",
            name="request_problem",
            field=models.CharField(blank=True, max_length=255),
        ),
        migrations.AddField(
            model_name="oraclerun",
            name="request_problem_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]

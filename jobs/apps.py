from django.apps import AppConfig


class JobsConfig(AppConfig):
    """The one job mechanism: leases and heartbeats on job rows, progress on the
    rows, the outbox for work that must follow a commit, and the reaper."""

    name = "jobs"
    verbose_name = "Jobs"

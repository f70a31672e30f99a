from django.apps import AppConfig


class DataUseConfig(AppConfig):
    """Data use (issue 34): credentials, attestations, the egress guard's
    decisions and the audit log. Imports accounts and windows only; oracle,
    exports and agents call it."""

    name = "datause"
    verbose_name = "Data use"

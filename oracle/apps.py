from django.apps import AppConfig


class OracleConfig(AppConfig):
    name = "oracle"

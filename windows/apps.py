from django.apps import AppConfig


class WindowsConfig(AppConfig):
    name = "windows"
    verbose_name = "Clinical data and windows"

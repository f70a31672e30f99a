from django.apps import AppConfig


class WindowsConfig(AppConfig):
    name = "windows"
    verbose_name = "Clinical data and windows"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in

        from windows.accounts import session_renewed_mark

        user_logged_in.connect(session_renewed_mark, dispatch_uid="session_renewed_mark")

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """The ground floor of access: roles, the one permission policy, the
    accounts the platform creates, and the web helpers every app's views share."""

    name = "accounts"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in
        from django.urls import register_converter

        from accounts.ids import IdConverter

        # Before any URLconf is read: every app's urls.py names its ids <id:...>.
        register_converter(IdConverter, "id")

        from accounts.sessions import physician_role_remember, session_renewed_mark

        user_logged_in.connect(
            session_renewed_mark, dispatch_uid="session_renewed_mark"
        )
        user_logged_in.connect(
            physician_role_remember, dispatch_uid="annotation_physician_role"
        )

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """Reference agents (RealICU spec section 9) and online evaluation of
    researchers' agents against a release: above ``exports``, which it scores
    through."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"

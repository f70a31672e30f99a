from django.apps import AppConfig


class SurveillanceConfig(AppConfig):
    """The CodeClinic surveillance companion (spec section 10): checkpoint
    labels every 4 h from the concept tracks, and the admin page of a stay's
    checkpoints. Above ``windows``; ``exports`` builds its releases."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "surveillance"

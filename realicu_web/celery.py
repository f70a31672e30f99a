"""The Celery application; configuration comes from Django settings (CELERY_*)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")

app = Celery("realicu_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _filesystem_broker_folders(sender, **kwargs) -> None:
    """The embedded filesystem broker needs its folders before anyone publishes."""
    options = sender.conf.broker_transport_options or {}
    if str(sender.conf.broker_url).startswith("filesystem://"):
        for key in (
            "data_folder_in",
            "data_folder_out",
            "processed_folder",
            "control_folder",
        ):
            if options.get(key):
                os.makedirs(options[key], exist_ok=True)

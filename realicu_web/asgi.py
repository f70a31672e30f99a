"""ASGI entry point, what gunicorn serves (gunicorn.conf.py: the uvicorn worker of
realicu_web.webserver): Django's handler with the bounds against slow clients of
realicu_web.handler."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
django.setup(set_prefix=False)

from realicu_web.handler import RequestHandler  # noqa: E402 - after setup

application = RequestHandler()

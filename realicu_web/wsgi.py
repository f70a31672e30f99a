"""WSGI entry point (gunicorn realicu_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
application = get_wsgi_application()

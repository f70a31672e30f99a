"""WSGI entry point (runserver, WSGI test clients). gunicorn serves the ASGI one,
realicu_web.asgi (gunicorn.conf.py), whose worker reads slow clients' requests
without holding a thread."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "realicu_web.settings")
application = get_wsgi_application()

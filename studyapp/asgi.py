"""ASGI entry point, for an ASGI server in front of the same application (the shipped stack uses WSGI)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")
application = get_asgi_application()

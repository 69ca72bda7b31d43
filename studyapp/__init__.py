"""The Django project package: settings, root URLs, the Celery application and the WSGI/ASGI entry points.

It is not an installed app and holds no models; the study domain is `studies` (app label ``studyapp``).
"""

from .celery import app as celery_app

__all__ = ["celery_app"]

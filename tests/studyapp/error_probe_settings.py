"""The site's settings with the error-probe URLs (tests/studyapp/test_error_reporting.py serves them for real)."""

from studyapp.settings import *  # noqa: F403

ROOT_URLCONF = "tests.studyapp.error_probe_urls"
ALLOWED_HOSTS = ["127.0.0.1"]

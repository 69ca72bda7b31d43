"""Static files in production: hashed names served with a year-long immutable cache header, so a browser
fetches each file once and every later page costs no static request at all."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.test import RequestFactory, override_settings
from django.utils.functional import empty


@pytest.fixture
def manifest_static(tmp_path, settings):
    storages = {**settings.STORAGES,
                "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
    # The project's own files only (the apps' bundled admin and API-browser assets take minutes to compress).
    with override_settings(STORAGES=storages, STATIC_ROOT=tmp_path, DEBUG=False,
                           STATICFILES_FINDERS=["django.contrib.staticfiles.finders.FileSystemFinder"]):
        from django.contrib.staticfiles.storage import staticfiles_storage

        staticfiles_storage._wrapped = empty  # re-read the storage setting
        call_command("collectstatic", "--noinput", "-v", "0")
        yield
        staticfiles_storage._wrapped = empty


def _serve(path: str):
    from whitenoise.middleware import WhiteNoiseMiddleware

    middleware = WhiteNoiseMiddleware(lambda request: pytest.fail(f"{path} reached Django"))
    return middleware(RequestFactory().get(path))


def test_hashed_static_files_are_cached_for_a_year_and_immutable(manifest_static):
    url = static("favicon.svg")
    assert re.search(r"favicon\.[0-9a-f]{12}\.svg$", url), url
    response = _serve(url)
    assert response.status_code == 200
    cache_control = response["Cache-Control"]
    assert "immutable" in cache_control
    assert int(re.search(r"max-age=(\d+)", cache_control).group(1)) >= 365 * 24 * 3600


def test_unhashed_names_are_served_with_a_short_cache_only(manifest_static):
    response = _serve("/static/favicon.svg")
    assert response.status_code == 200 and "immutable" not in response["Cache-Control"]

"""The upload knobs have their defaults in one place and are read through `upload_limits()`."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.test import override_settings

from studies.conf import UPLOAD_DEFAULTS, upload_limits
from tests.packages import PROJECT_PACKAGES

ROOT = Path(__file__).resolve().parents[2]


def test_only_the_accessor_reads_the_uploads_dict():
    direct = re.compile(r"settings\.UPLOADS\b|getattr\(settings, \"UPLOADS\"")
    readers = {p.relative_to(ROOT).as_posix() for app in PROJECT_PACKAGES
               for p in (ROOT / app).rglob("*.py") if direct.search(p.read_text())}
    assert readers == {"studies/conf.py"}


def test_settings_set_only_upload_keys_the_defaults_know():
    assert set(settings.UPLOADS) <= set(UPLOAD_DEFAULTS)


@override_settings(UPLOADS={"MAX_FILES_PER_EPISODE": 3})
def test_a_partial_uploads_dict_is_laid_over_the_defaults():
    assert upload_limits() == {**UPLOAD_DEFAULTS, "MAX_FILES_PER_EPISODE": 3}

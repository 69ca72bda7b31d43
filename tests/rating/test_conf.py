"""The rating knobs have their defaults in one place and are read through `rating_settings()`."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.test import override_settings

from rating import conf as rating_conf
from rating.conf import rating_settings
from tests.packages import PROJECT_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r'rating_settings\(\)\["([A-Z_]+)"\]')


def test_every_rating_key_read_has_a_default():
    read = {key for app in PROJECT_PACKAGES for p in (ROOT / app).rglob("*.py")
            for key in READ.findall(p.read_text())}
    assert {"BOOTSTRAP_ROUNDS", "REML_INTERVAL_SECONDS"} <= read
    assert read <= set(rating_conf.DEFAULTS)


def test_every_default_is_read_by_the_code():
    skip = {ROOT / "rating" / "conf.py", ROOT / "studyapp" / "settings.py"}
    code = "".join(p.read_text() for app in PROJECT_PACKAGES for p in (ROOT / app).rglob("*.py") if p not in skip)
    assert [key for key in rating_conf.DEFAULTS if f'["{key}"]' not in code] == []


def test_settings_set_only_rating_keys_the_defaults_know():
    assert set(settings.RATING) <= set(rating_conf.DEFAULTS)


@override_settings(RATING={"BOOTSTRAP_ROUNDS": 7})
def test_a_partial_rating_dict_is_laid_over_the_defaults():
    assert rating_settings() == {**rating_conf.DEFAULTS, "BOOTSTRAP_ROUNDS": 7}

"""The expert workspace's knobs have their defaults in one place and are read through `experts_settings()`."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.test import override_settings

from experts import conf as experts_conf
from experts.selectors import adjudication_gap
from experts.services.invites import invite_max_age_seconds
from tests.packages import PROJECT_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r'experts_settings\(\)\["([A-Z_]+)"\]')


def test_every_experts_key_read_has_a_default():
    read = {key for p in (ROOT / "experts").rglob("*.py") for key in READ.findall(p.read_text())}
    assert read == {"INVITE_DAYS", "ADJUDICATION_SCORE_GAP"}
    assert read <= set(experts_conf.DEFAULTS)


def test_only_the_accessor_reads_the_settings_dict():
    direct = re.compile(r"settings\.EXPERTS\b|getattr\(settings, \"EXPERTS\"")
    sources = [p for app in PROJECT_PACKAGES for p in (ROOT / app).rglob("*.py")]
    assert {p.relative_to(ROOT).as_posix() for p in sources if direct.search(p.read_text())} == {"experts/conf.py"}


def test_settings_set_only_keys_the_defaults_know():
    assert set(settings.EXPERTS) <= set(experts_conf.DEFAULTS)


@override_settings(EXPERTS={"INVITE_DAYS": 2})
def test_a_partial_dict_is_laid_over_the_defaults():
    assert invite_max_age_seconds() == 2 * 24 * 3600
    assert adjudication_gap() == experts_conf.DEFAULTS["ADJUDICATION_SCORE_GAP"]

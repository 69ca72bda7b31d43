"""The grading knobs have their defaults in one place and are read through one accessor."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.test import override_settings

from grading import conf as grading_conf
from grading.conf import grading_settings
from tests.packages import PROJECT_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for app in PROJECT_PACKAGES for p in (ROOT / app).rglob("*.py")]
# `grading_settings()["KEY"]`, `conf = grading_settings()` … `conf["KEY"]`, and the same for rating.
READ = re.compile(r'(?:(?:grading|rating)_settings\(\)|\bconf)(?:\[|\.get\()"([A-Z_]+)"')


def _keys_read(accessor: str) -> set[str]:
    keys: set[str] = set()
    for path in SOURCES:
        text = path.read_text()
        if f"{accessor}()" in text and path.name != "conf.py":
            keys |= set(READ.findall(text))
    return keys


def test_no_module_reads_the_settings_dicts_directly():
    direct = re.compile(r"settings\.(GRADING|RATING)\b|getattr\(settings, \"(GRADING|RATING)\"")
    readers = {p.relative_to(ROOT).as_posix() for p in SOURCES if direct.search(p.read_text())}
    assert readers == {"grading/conf.py", "rating/conf.py"}


def test_every_grading_key_read_has_a_default():
    read = _keys_read("grading_settings")
    assert "EXTRACT_MAX_CHARS" in read  # the scan finds the reads
    assert read <= set(grading_conf.DEFAULTS)


def test_settings_set_only_grading_keys_the_defaults_know():
    assert set(settings.GRADING) <= set(grading_conf.DEFAULTS)


def test_the_default_anthropic_judge_is_the_one_the_readme_documents():
    readme = (ROOT / "README.md").read_text()
    model = grading_conf.DEFAULT_MODELS["anthropic"]
    assert f"`{model}`" in readme
    assert {"provider": "anthropic", "model": model} in grading_conf.DEFAULTS["DEFAULT_JUDGES"]


@override_settings(GRADING={"MAX_RETRIES": 9})
def test_a_partial_grading_dict_is_laid_over_the_defaults():
    conf = grading_settings()
    assert conf["MAX_RETRIES"] == 9
    assert conf["EXTRACT_MAX_CHARS"] == grading_conf.DEFAULTS["EXTRACT_MAX_CHARS"]
    assert conf["FLUENCY_CODER"] == grading_conf.DEFAULTS["RUBRIC_GENERATOR"]

"""The README's settings list, module list and sweep interval say what the code does."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from django.conf import settings

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
ENV_READERS = {"get", "getenv", "_env_bool", "_env_list"}
APPS = ("studies", "rating", "pairing", "surveys", "grading", "experts", "journey", "console")


def _section(start: str, end: str) -> str:
    return README[README.index(start):README.index(end, README.index(start))]


def _variables_the_settings_read() -> set[str]:
    names = set()
    for node in ast.walk(ast.parse((ROOT / "studyapp/settings.py").read_text())):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called in ENV_READERS and isinstance(node.args[0].value, str) and node.args[0].value.isupper():
            names.add(node.args[0].value)
    return names


def _variables_the_readme_lists() -> set[str]:
    table = _section("## Configuration", "### With PostgreSQL")
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)}


def test_the_settings_table_lists_every_variable_the_settings_read_and_no_other():
    read, listed = _variables_the_settings_read(), _variables_the_readme_lists()
    assert {"DJANGO_ALLOWED_HOSTS", "GRADING_SWEEP_SECONDS", "EXPERT_INVITE_DAYS"} <= read
    assert sorted(read - listed) == [], "read by studyapp/settings.py but missing from the README"
    assert sorted(listed - read - {"NUMBA_CACHE_DIR"}) == [], "in the README but read nowhere"


def _knob_dicts() -> dict[str, str]:
    """Return {"<app>/conf.py": "<SETTINGS DICT>"} for every app conf module that reads one dict."""
    found = {}
    for conf in sorted(ROOT.glob("*/conf.py")):
        for node in ast.walk(ast.parse(conf.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) >= 2
                    and ast.unparse(node.args[0]) == "settings" and isinstance(node.args[1], ast.Constant)):
                found[str(conf.relative_to(ROOT))] = node.args[1].value
    return found


def test_the_readme_names_every_apps_knob_dict_and_its_defaults_module():
    dicts = _knob_dicts()
    assert {"experts/conf.py": "EXPERTS", "grading/conf.py": "GRADING"}.items() <= dicts.items()
    config = _section("## Configuration", "### With PostgreSQL")
    dict_sentence = re.search(r"Each app reads its knobs from one dict in the settings \(([^)]*)\)", config)
    assert dict_sentence, "the README's sentence listing the knob dicts"
    assert sorted(re.findall(r"`([A-Z]+)`", dict_sentence.group(1))) == sorted(dicts.values())
    defaults_sentence = config[:config.index("| variable |")]
    assert [conf for conf in dicts if f"`{conf}`" not in defaults_sentence] == []
    assert all(isinstance(getattr(settings, name), dict) for name in dicts.values())


def _module_block(app: str) -> str:
    block = _section("## What is where", "## Configuration")
    block = block[block.index("\n" + f"{app}/".ljust(12)):]
    following = re.search(r"\n[a-z]+/ ", block[1:])
    return block[: following.start() + 1] if following else block


def test_the_module_list_names_every_file_of_the_project_package():
    block = _module_block("studyapp")
    files = sorted(path.name for path in (ROOT / "studyapp").glob("*.py") if path.name != "__init__.py")
    assert len(files) >= 14
    assert [name for name in files if name not in block] == []


def test_every_file_the_module_list_names_exists_in_its_app():
    stale = []
    for app in (*APPS, "studyapp"):
        for name in set(re.findall(r"\b([a-z_]+\.py)\b", _module_block(app))):
            if not list((ROOT / app).rglob(name)):
                stale.append(f"{app}/: {name}")
    assert stale == []


def test_the_readme_gives_the_rating_sweeps_real_interval():
    sweep = settings.CELERY_BEAT_SCHEDULE["rating-refresh-sweep"]
    source = (ROOT / "studyapp/settings.py").read_text()
    assert re.search(r'"rating-refresh-sweep": \{[^}]*GRADING_SWEEP_SECONDS', source)
    assert f"every `GRADING_SWEEP_SECONDS` ({sweep['schedule']:.0f} s)" in README
    assert not re.search(r"\d+-minute sweep or `refresh_ratings`", README)


def test_the_checks_read_the_files_they_guard():
    assert Path(ROOT / "README.md").exists() and "settings.py" in _module_block("studyapp")

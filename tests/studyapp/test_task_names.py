"""Each Celery task's registered name is spelled once, in its app's `task_names` module."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from django.apps import apps
from django.conf import settings

from studyapp.celery import app

ROOT = Path(settings.BASE_DIR)


def _constants() -> dict[str, str]:
    """Return {"<app>.task_names.CONSTANT": name} over every project app that has a task_names module, counting
    only the constants a module spells itself (a re-export of a lower app's name is not a second spelling)."""
    found: dict[str, str] = {}
    for config in apps.get_app_configs():
        path = ROOT / config.name.replace(".", "/") / "task_names.py"
        if not path.exists():
            continue
        module = importlib.import_module(f"{config.name}.task_names")
        spelled = {target.id for node in ast.parse(path.read_text()).body if isinstance(node, ast.Assign)
                   for target in node.targets if isinstance(target, ast.Name)}
        found |= {f"{module.__name__}.{key}": value for key, value in vars(module).items()
                  if key.isupper() and key in spelled}
    return found


def _registered() -> set[str]:
    """Return every task the worker registers (autodiscovery runs on first use)."""
    app.loader.import_default_modules()
    return set(app.tasks)


def _project_tasks() -> set[str]:
    project = tuple(f"{config.name}." for config in apps.get_app_configs()
                    if (ROOT / config.name.replace(".", "/")).is_dir())
    return {name for name in _registered() if name.startswith(project)}


def test_every_constant_names_a_registered_task():
    constants = _constants()
    assert {"grading.task_names.GRADE_SOLO_RUN", "rating.task_names.RECORD_OBSERVATION",
            "console.task_names.RUN_POWER",
            "studies.task_names.GRADE_EPISODE", "pairing.task_names.REFRESH_DESIGN_POSTERIOR"} <= set(constants)
    registered = _registered()
    assert {key: name for key, name in constants.items() if name not in registered} == {}


def test_every_registered_task_has_one_constant():
    names = list(_constants().values())
    assert len(names) == len(set(names))
    assert len(_project_tasks()) >= 18
    assert _project_tasks() - set(names) == set()

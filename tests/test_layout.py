"""Tests live at the mirrored path of what they test: ``tests/<app>/…`` for an app's modules, and at the top
only checks of the whole project or of a helper module that sits beside them."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

TESTS = ROOT / "tests"
WHOLE_PROJECT = {"test_import_graph.py", "test_layers.py", "test_layout.py", "test_readme.py"}
NOT_APPS = {"e2e", "factories", "scripts", "__pycache__"}


def test_top_level_tests_check_the_whole_project_or_a_helper_beside_them():
    stray = [path.name for path in TESTS.glob("test_*.py")
             if path.name not in WHOLE_PROJECT and not (TESTS / path.name.removeprefix("test_")).exists()]
    assert stray == []


def test_each_test_folder_mirrors_a_package_of_the_project():
    folders = [path.name for path in TESTS.iterdir() if path.is_dir() and path.name not in NOT_APPS]
    assert [name for name in folders if not (ROOT / name / "__init__.py").exists()] == []


def test_tests_of_the_project_package_are_not_filed_under_the_study_domain():
    """A test module under tests/studies/ that imports ``studyapp`` tests the project package, not studies/."""
    misfiled = []
    for path in (TESTS / "studies").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(name and name.split(".")[0] == "studyapp" for name in names):
                    misfiled.append(path.name)
    assert misfiled == []


# Folders whose templates a contrib app or a library looks up by its own name, wherever they are rendered from.
SHARED_TEMPLATE_FOLDERS = {"admin", "registration", "drf_spectacular"}
APPS = ("console", "journey", "experts", "grading", "surveys", "pairing", "rating", "studies", "studyapp")


def test_templates_live_in_a_folder_named_after_the_app_that_renders_them():
    """A ``"<folder>/<name>.html"`` string in an app's code names its own folder (or a contrib one)."""
    misplaced = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and node.value.endswith(".html") and "/" in node.value and " " not in node.value:
                    folder = node.value.split("/", 1)[0]
                    if folder not in {app, *SHARED_TEMPLATE_FOLDERS}:
                        misplaced.append(f"{path.relative_to(ROOT)}: {node.value}")
    assert misplaced == []
    assert not (ROOT / "templates" / "worker").exists() and not (ROOT / "templates" / "dashboard").exists()

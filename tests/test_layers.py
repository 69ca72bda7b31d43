"""Layer rules a reader relies on: selectors return data or None (the view decides on the 404), and views
write nothing themselves (a write is a service's).

Checked on the source, so a new selector that answers HTTP or a view that writes fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

APPS = ("studies", "rating", "pairing", "surveys", "grading", "experts", "journey", "console", "studyapp")
HTTP_NAMES = {"get_object_or_404", "get_list_or_404", "Http404"}
ORM_WRITES = {"create", "get_or_create", "update_or_create", "bulk_create", "bulk_update", "update", "delete"}


def _modules(kind: str) -> list[Path]:
    found = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            parts = path.relative_to(ROOT).parts
            if kind in (path.stem, *parts[:-1]) and "migrations" not in parts:
                found.append(path)
    return sorted(found)


def _http_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in {"django.shortcuts", "django.http",
                                                                "django.http.response"}:
            uses += [f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}" for alias in node.names]
        elif isinstance(node, ast.Name) and node.id in HTTP_NAMES:
            uses.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {node.id}")
    return uses


def _orm_writes(path: Path, root: Path = ROOT) -> list[str]:
    """Calls of the form ``<Model>.objects.<write>(…)`` or ``….objects.filter(…).<write>(…)``."""
    writes = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ORM_WRITES
                and ".objects" in ast.unparse(node.func.value)):
            writes.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.func)}")
    return writes


def test_the_checks_see_the_modules_they_guard():
    assert ROOT / "console/dashboard/selectors.py" in _modules("selectors")
    assert ROOT / "console/api/views/auth.py" in _modules("views")


def test_selectors_return_data_or_none_and_never_answer_http():
    uses = [use for path in _modules("selectors") for use in _http_uses(path)]
    assert uses == []


def test_views_leave_every_write_to_a_service():
    writes = [write for path in _modules("views") for write in _orm_writes(path)]
    assert writes == []


def test_the_checks_find_a_write_in_a_view_and_a_404_in_a_selector(tmp_path):
    view = tmp_path / "views.py"
    view.write_text("def post(request):\n    Token.objects.get_or_create(user=request.user)\n")
    assert len(_orm_writes(view, tmp_path)) == 1

"""`studies/task_sending.py` is the one way tasks are sent: on commit inside a transaction, at once outside."""

from __future__ import annotations

import ast

import pytest
from celery import current_app

from studies.task_sending import send_task_now
from tests.conftest import ROOT

APPS = ("studies", "rating", "pairing", "surveys", "grading", "experts", "journey", "console", "studyapp")


def test_no_module_but_task_sending_calls_send_task_itself():
    direct = []
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if path == ROOT / "studies/task_sending.py" or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in {"send_task", "apply_async", "delay"}:
                    direct.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert direct == []


def test_sending_at_once_stores_no_result_and_raises_a_broker_error_for_the_caller(monkeypatch):
    sent = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: sent.append((name, args, kw)))
    send_task_now("grading.tasks.grade_episode", (7,), countdown=3)
    assert sent == [("grading.tasks.grade_episode", [7], {"countdown": 3, "ignore_result": True})]

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(current_app, "send_task", broker_down)
    with pytest.raises(ConnectionError):
        send_task_now("grading.tasks.grade_episode", [7])

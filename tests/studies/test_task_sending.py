"""`studies/task_sending.py` is the one way tasks are sent: on commit inside a transaction, at once outside; a
failed send makes the next sends skip the broker for a few seconds (the sweep does their work)."""

from __future__ import annotations

import ast
from unittest import mock

import pytest
from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError

from studies import task_sending
from studies.task_sending import broker_skipped, send_task_now, send_task_on_commit
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



def _send_three() -> None:
    with transaction.atomic():
        for pk in (1, 2, 3):
            send_task_on_commit("studies.example", [pk])


@pytest.mark.django_db(transaction=True)
def test_after_one_failed_send_the_others_of_the_request_skip_the_broker():
    with mock.patch.object(current_app, "send_task", side_effect=OperationalError("timed out")) as send:
        _send_three()
    assert send.call_count == 1 and broker_skipped()


@pytest.mark.django_db(transaction=True)
def test_sends_go_to_the_broker_again_once_the_skip_has_passed(monkeypatch):
    with mock.patch.object(current_app, "send_task", side_effect=OperationalError("timed out")):
        _send_three()
    monkeypatch.setattr(task_sending, "SKIP_SECONDS", 0.0)
    task_sending._broker_failed()  # a skip of no length: over at once
    with mock.patch.object(current_app, "send_task") as send:
        _send_three()
    assert send.call_count == 3 and not broker_skipped()


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_answers_is_never_skipped():
    with mock.patch.object(current_app, "send_task") as send:
        _send_three()
    assert send.call_count == 3 and not broker_skipped()

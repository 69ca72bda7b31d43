"""A failed send makes the next sends skip the broker for a few seconds; the sweep does their work."""

from __future__ import annotations

from unittest import mock

import pytest
from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError

from studies import task_sending
from studies.task_sending import broker_skipped, send_task_on_commit

pytestmark = pytest.mark.django_db(transaction=True)


def _send_three() -> None:
    with transaction.atomic():
        for pk in (1, 2, 3):
            send_task_on_commit("studies.example", [pk])


def test_after_one_failed_send_the_others_of_the_request_skip_the_broker():
    with mock.patch.object(current_app, "send_task", side_effect=OperationalError("timed out")) as send:
        _send_three()
    assert send.call_count == 1 and broker_skipped()


def test_sends_go_to_the_broker_again_once_the_skip_has_passed(monkeypatch):
    with mock.patch.object(current_app, "send_task", side_effect=OperationalError("timed out")):
        _send_three()
    monkeypatch.setattr(task_sending, "SKIP_SECONDS", 0.0)
    task_sending._broker_failed()  # a skip of no length: over at once
    with mock.patch.object(current_app, "send_task") as send:
        _send_three()
    assert send.call_count == 3 and not broker_skipped()


def test_a_broker_that_answers_is_never_skipped():
    with mock.patch.object(current_app, "send_task") as send:
        _send_three()
    assert send.call_count == 3 and not broker_skipped()

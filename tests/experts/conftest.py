"""Expert workspace fixtures."""

from __future__ import annotations

import pytest
from celery import current_app


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, list]]:
    """Record `send_task` calls instead of publishing them to the broker."""
    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: sent.append((name, list(args or []))))
    return sent

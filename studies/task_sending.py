"""Send a Celery task by name: the one way every app starts follow-up work.

Inside a transaction, `send_task_on_commit` (a worker never reads a row that is not committed, and a broker
error never fails the request); outside one -- the sweeps, the debounced refresh, management commands --
`send_task_now`, which lets the caller count or report a broker error.

Tasks are sent by the name their app declares in its ``task_names`` module, through ``celery.current_app``
(the project's app, made the default in ``studyapp/celery.py``), so a sender never imports the app that does
the work -- the study domain can start grading without importing ``grading``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)

# After a send fails, later sends from this process skip the broker for this long: a hung broker (accepting,
# never answering) costs each send its full socket timeout, and one request may send several messages.
SKIP_SECONDS = 5.0
_skip_lock = threading.Lock()
_skip_until = 0.0


def broker_skipped() -> bool:
    """True while sends skip a broker that just failed (the sweep does their work)."""
    with _skip_lock:
        return _skip_until > time.monotonic()


def broker_skip_reset() -> None:
    """Forget a failed broker (tests, and a worker that knows the broker is back)."""
    global _skip_until
    with _skip_lock:
        _skip_until = 0.0


def _broker_failed() -> None:
    global _skip_until
    with _skip_lock:
        _skip_until = time.monotonic() + SKIP_SECONDS


def send_task_on_commit(name: str, args: Sequence[Any], **options: Any) -> None:
    """Send a task by name once the current transaction commits; a broker error is logged, never raised.

    The database is the source of truth: whatever this message would have started, the reconciliation
    sweep finds from the rows and does, so a broker outage delays work instead of failing the request.
    No sender reads a task's result, so none is stored: the send never touches the result backend (with
    Redis it would subscribe to the result channel, and retry for seconds while Redis is down). After a failed
    send, sends from this process skip the broker for ``SKIP_SECONDS``, so a request that sends several messages
    to a hung broker waits for one timeout, not one per message.
    """
    options.setdefault("ignore_result", True)

    def send() -> None:
        if broker_skipped():
            logger.warning("did not enqueue %s%s: the broker failed moments ago; the reconciliation sweep will pick "
                           "it up", name, tuple(args))
            return
        try:
            current_app.send_task(name, args=list(args), **options)
        except Exception:
            _broker_failed()
            logger.warning("could not enqueue %s%s; the reconciliation sweep will pick it up", name, tuple(args),
                           exc_info=True)

    transaction.on_commit(send)


def send_task_now(name: str, args: Sequence[Any], **options: Any) -> None:
    """Send a task by name at once, storing no result; a broker error is raised for the caller to handle.

    For senders with no transaction to wait for: a sweep that counts what it could not send, a command that
    reports it, a refresh that must release its debounce key when the send fails.
    """
    options.setdefault("ignore_result", True)
    current_app.send_task(name, args=list(args), **options)

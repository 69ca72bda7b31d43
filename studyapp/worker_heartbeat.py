"""The Celery worker's heartbeat: a consumer bootstep that touches a file while the worker consumes.

Celery starts a consumer step only once the worker is connected to the broker and stops it whenever that
connection is lost, so a fresh file means the worker's main loop runs *and* it is consuming. The file is
touched every ``WORKER_HEARTBEAT_SECONDS`` (10 s); it is ``WORKER_HEARTBEAT_FILE``, by default
``run/worker-<host name>.heartbeat`` under the project's ``VAR_DIR`` -- not a shared temporary folder, where any
other user or project on the host could create, touch or remove it (give several workers on one host a file
each). ``studyapp.worker_health`` checks it.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

# The settings' default VAR_DIR, read without importing Django (the health check must stay cheap).
_DEFAULT_VAR_DIR = Path(__file__).resolve().parent.parent / "var"


def heartbeat_file() -> Path:
    configured = os.environ.get("WORKER_HEARTBEAT_FILE")
    if configured:
        return Path(configured)
    var_dir = Path(os.environ.get("VAR_DIR") or _DEFAULT_VAR_DIR)
    return var_dir / "run" / f"worker-{socket.gethostname()}.heartbeat"


def heartbeat_seconds() -> float:
    return float(os.environ.get("WORKER_HEARTBEAT_SECONDS", "10"))


def heartbeat_age(now: float | None = None) -> float | None:
    """Seconds since the last beat, or None when there is no heartbeat file."""
    try:
        beat = heartbeat_file().stat().st_mtime
    except FileNotFoundError:
        return None
    return (time.time() if now is None else now) - beat


def _beat() -> None:
    path = heartbeat_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def heartbeat_step() -> type:
    """The consumer bootstep class (built on call, so importing this module does not import Celery)."""
    from celery import bootsteps

    class Heartbeat(bootsteps.StartStopStep):
        requires = ("celery.worker.consumer.tasks:Tasks",)

        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            self.timer_entry = None

        def start(self, parent: Any) -> None:
            _beat()
            self.timer_entry = parent.timer.call_repeatedly(heartbeat_seconds(), _beat, priority=10)

        def stop(self, parent: Any) -> None:
            if self.timer_entry is not None:
                self.timer_entry.cancel()
                self.timer_entry = None

        shutdown = stop

    return Heartbeat

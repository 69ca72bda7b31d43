"""``python -m studyapp.worker_health [--max-age 60]``: exit 0 while the worker's heartbeat is fresh, else 1.

A supervisor's health check for the Celery worker (the compose ``worker`` service runs it every 30 s): the
heartbeat file (``studyapp.worker_heartbeat``) is touched only while the worker is connected to the broker and
its main loop runs, so a stale file means a stuck worker or one that has lost the broker. The check opens no
connection to the database or the broker.
"""

from __future__ import annotations

import argparse
import sys

from studyapp.worker_heartbeat import heartbeat_age, heartbeat_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Exit 0 when the Celery worker's heartbeat is fresh.")
    parser.add_argument("--max-age", type=float, default=60.0, help="seconds (default 60)")
    args = parser.parse_args(argv)
    age = heartbeat_age()
    if age is None:
        print(f"unhealthy: no heartbeat file at {heartbeat_file()} (worker not started or never connected)")
        return 1
    if age > args.max_age:
        print(f"unhealthy: last heartbeat {age:.0f} s ago (more than {args.max_age:g} s): the worker is stuck "
              "or has lost the broker")
        return 1
    print(f"healthy: last heartbeat {age:.1f} s ago")
    return 0


if __name__ == "__main__":
    sys.exit(main())

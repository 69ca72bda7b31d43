"""Keep a command running: restart it whenever it exits, until this process is told to stop.

`make run` starts the Celery worker through this, as compose (`restart: unless-stopped`) and the systemd unit in
docs/grading-reliability.md (`Restart=always`) do for theirs, so a worker that dies for any reason (an
unrecoverable broker error, an out-of-memory kill, a crash) is back within seconds and the work it held is
taken over by its lease and the reconciliation sweep. Standard library only:

    python -m studyapp.supervise -- celery -A studyapp worker -B -Q default,grading,rating

SIGTERM or SIGINT ends supervision and is passed on to the command as SIGTERM (Celery's warm shutdown; a
terminal's Ctrl-C already reached it, and a second SIGINT would make Celery stop cold). A command that keeps
dying quickly is restarted with a growing pause (1 s doubling to `--max-delay`), reset once it has run for
`--stable-after` seconds.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

logger = logging.getLogger("studyapp.supervise")


class Supervisor:
    """Run `command` again each time it exits, with backoff, until `stop()`."""

    def __init__(self, command: Sequence[str], *, max_delay: float = 30.0, stable_after: float = 60.0) -> None:
        self.command = list(command)
        self.max_delay = max_delay
        self.stable_after = stable_after
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.restarts = 0

    def stop(self) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)

    def run(self) -> int:
        delay = 1.0
        code = 0
        while not self.stopping:
            started = time.monotonic()
            self.child = subprocess.Popen(self.command)  # noqa: S603 - the operator's own command line
            logger.info("supervise: started %s (pid %s)", self.command[0], self.child.pid)
            code = self._wait(self.child)
            if self.stopping:
                break
            ran = time.monotonic() - started
            quick_again = self.restarts and ran < self.stable_after
            delay = min(delay * 2, self.max_delay) if quick_again else 1.0
            logger.warning("supervise: %s exited with %s after %.0f s; restarting in %.0f s", self.command[0],
                           code, ran, delay)
            self.restarts += 1
            deadline = time.monotonic() + delay
            while not self.stopping and time.monotonic() < deadline:
                time.sleep(0.1)
        return code

    def _wait(self, child: subprocess.Popen[bytes]) -> int:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:  # SIGINT arrives here when no handler is installed; keep waiting
                self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Restart a command whenever it exits.")
    parser.add_argument("--max-delay", type=float, default=30.0, help="longest pause between restarts (s)")
    parser.add_argument("--stable-after", type=float, default=60.0,
                        help="a run this long resets the pause to 1 s")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to supervise after --")
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s: %(levelname)s/supervise] %(message)s")
    supervisor = Supervisor(command, max_delay=args.max_delay, stable_after=args.stable_after)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        supervisor.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())

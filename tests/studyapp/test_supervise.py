"""studyapp.supervise restarts a command that exits and stops it (warm) when told to stop."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT


def _supervise(tmp_path: Path, script: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "studyapp.supervise", "--max-delay", "1", "--",
                             sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_for_lines(path: Path, count: int, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} lines")


def test_a_command_that_dies_is_started_again_until_the_supervisor_is_stopped(tmp_path):
    starts = tmp_path / "starts"
    # Each run records its pid and dies as an unrecoverable worker error would (exit 1).
    supervisor = _supervise(tmp_path, f"import os; open({str(starts)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
                                      "raise SystemExit(1)")
    pids = _wait_for_lines(starts, 3)
    assert len(set(pids)) == len(pids), "every restart is a new process"
    supervisor.send_signal(signal.SIGTERM)
    output, _ = supervisor.communicate(timeout=30)
    assert supervisor.returncode is not None
    assert "exited with 1" in output and "restarting" in output


def test_stopping_the_supervisor_stops_the_command_with_sigterm_and_does_not_restart_it(tmp_path):
    marks = tmp_path / "marks"
    script = (f"import signal, sys, time\n"
              f"def bye(*_):\n    open({str(marks)!r}, 'a').write('sigterm\\n'); sys.exit(0)\n"
              f"signal.signal(signal.SIGTERM, bye)\n"
              f"open({str(marks)!r}, 'a').write('started\\n')\n"
              f"time.sleep(60)\n")
    supervisor = _supervise(tmp_path, script)
    _wait_for_lines(marks, 1)
    supervisor.send_signal(signal.SIGINT)  # Ctrl-C: passed on as SIGTERM (a warm shutdown)
    supervisor.communicate(timeout=30)
    assert supervisor.returncode == 0
    time.sleep(1.5)  # longer than a restart's pause: nothing is started again
    assert marks.read_text().splitlines() == ["started", "sigterm"]

"""`make run` prints the demo accounts and links below the worker's banner, where a newcomer still sees them.

The run recipe is executed for real by make and bash; only the programs it starts are stand-ins (a worker
that prints a 60-line banner and its ready line, a web server that stops after a moment), so the test
checks the recipe's own plumbing: the order of the output, and that the worker is still stopped when the web
server ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_CELERY = """#!/bin/bash
for i in $(seq 1 60); do echo "banner line $i"; done
echo "[2026-01-01 00:00:00,000: INFO/MainProcess] celery@host ready." >&2
trap 'echo "worker: warm shutdown"; exit 0' TERM
while true; do sleep 0.1; done
"""
FAKE_PYTHON = """#!/bin/bash
case "$*" in
  "-m studyapp.supervise --"*) exec "$REAL_PYTHON" "$@";;  # the real supervisor runs the worker
  *"demo --access"*) echo "Demo accounts (password: demo-password):"; echo "Worker invitation link: $5";;
  *runserver*) for i in $(seq 1 100); do grep -q "celery@host ready" "$LOG" 2>/dev/null && break; sleep 0.1; done
               sleep 2; echo "web: stopping";;
  *) ;;
esac
"""


@pytest.mark.skipif(not shutil.which("make") or not shutil.which("awk"), reason="make and awk are needed")
def test_make_run_prints_the_accounts_after_the_worker_banner(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, script in (("celery", FAKE_CELERY), ("python", FAKE_PYTHON)):
        path = bin_dir / name
        path.write_text(textwrap.dedent(script))
        path.chmod(0o755)
    log = tmp_path / "run.log"
    with log.open("w") as handle:
        # -o demo: the demo (and the install and migrations behind it) counts as done; the recipe itself runs.
        result = subprocess.run(
            ["make", "--no-print-directory", "-o", "demo", "run", f"BIN={bin_dir}", "PORT=8765"],
            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, timeout=60,
            env={**os.environ, "LOG": str(log), "REAL_PYTHON": sys.executable},
        )
    lines = log.read_text().splitlines()
    assert result.returncode == 0, lines
    last_banner = max(i for i, line in enumerate(lines) if line.startswith("banner line"))
    accounts = next(i for i, line in enumerate(lines) if line.startswith("Demo accounts"))
    assert accounts > last_banner, lines
    assert any(line.startswith("Worker invitation link: http://127.0.0.1:8765") for line in lines), lines
    # The worker stops warmly when the web server ends (its last line may pass awk after make's own "Stopped.").
    assert "worker: warm shutdown" in lines and "Stopped." in lines, lines

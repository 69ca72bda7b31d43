"""`make run` stops cleanly on Ctrl-C: the worker shuts down warm, once, and make returns promptly."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Like Celery: the first SIGINT or a SIGTERM starts one warm shutdown (another SIGTERM changes nothing); a
# second SIGINT makes it stop cold, killing running tasks. The terminal's Ctrl-C reaches the worker, and the
# supervisor passes a SIGTERM on: that must stay one warm shutdown.
FAKE_CELERY = """#!/bin/bash
ints=0
stop() { if [ -z "$stopping" ]; then stopping=1; echo "worker: warm shutdown"; sleep 0.3; exit 0; fi; }
trap 'ints=$((ints + 1)); if [ $ints -gt 1 ]; then echo "worker: cold shutdown"; fi; stop' INT
trap 'stop' TERM
echo "worker: ready"
while :; do sleep 0.1; done
"""
# The worker runs under the real supervisor (studyapp/supervise.py), started by the real interpreter.
FAKE_PYTHON = """#!/bin/bash
case "$*" in
  "-m studyapp.supervise --"*) exec "$REAL_PYTHON" "$@" ;;
  *runserver*) trap 'echo "web: stopped"; exit 0' INT TERM; echo "web: ready"; while :; do sleep 0.1; done ;;
  *) exit 0 ;;
esac
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_ctrl_c_on_make_run_stops_web_and_worker_once_and_returns(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("celery", FAKE_CELERY), ("python", FAKE_PYTHON)):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    log = tmp_path / "make.log"
    # -o demo: the real recipe of `run` only, with the web and worker binaries replaced by stand-ins.
    with log.open("w") as out:
        process = subprocess.Popen(["make", "--no-print-directory", "-o", "demo", "run", f"BIN={bin_dir}"],
                                   cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, "REAL_PYTHON": sys.executable})
    deadline = time.monotonic() + 60  # a wait, not a measure: it ends as soon as both are ready
    while time.monotonic() < deadline and not all(w in log.read_text() for w in ("web: ready", "worker: ready")):
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole foreground group
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail("make run did not stop within 15 s of Ctrl-C")
    output = log.read_text()
    assert "web: ready" in output and "worker: ready" in output, output
    assert output.count("worker: warm shutdown") == 1 and "cold shutdown" not in output, output
    assert output.count("Stopped.") == 1, output
    assert "Segmentation" not in output
    assert not subprocess.run(["pgrep", "-f", str(bin_dir)], capture_output=True).stdout, "nothing left running"

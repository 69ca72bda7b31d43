"""Print grading recovery per fault with the production defaults (60 s lease, 60 s sweep, real retry counts).

Faults: pool child killed, worker main process killed (its supervisor restarts it), broker restarted with a
message unacknowledged (nothing restarts the worker but its supervisor), broker down mid-grade and at submit,
one message delivered three times, a provider failing for good (held, then a staff retry). For each: seconds
from the fault until every episode is graded, observed and coded (target ≤ 180 s), paid calls per episode
(one per judge and one coding, plus replies a killed worker lost), and the submit latency during the broker
outage (target ≤ 1 s).

Runs the scenarios of tests/grading/test_flow_grading_chaos.py (real workers started through
`studyapp.supervise` where the docs say so, a private redis-server the scenario stops and starts, PostgreSQL,
the fake providers) with GRADING_CHAOS_TIMING=production, so every grading knob is at its default. Takes about
fifteen minutes. Needs DATABASE_URL (PostgreSQL) and REDIS_URL like the test suite:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench REDIS_URL=redis://127.0.0.1:6379/2 \\
        .venv/bin/python bench/grading_recovery.py [-k broker]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"RECOVERY (?P<fault>[^:]+): (?P<seconds>\d+\.\d+) s .*?paid calls per episode: (?P<paid>[\d.]+)")
SUBMIT = re.compile(r"submit during the outage answered in (?P<seconds>\d+\.\d+) s")
TARGET_SECONDS, SUBMIT_TARGET = 180.0, 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the scenarios whose test name matches (pytest -k)")
    args = parser.parse_args()
    print(f"machine load at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    began = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
               "tests/grading/test_flow_grading_chaos.py", *(["-k", args.k] if args.k else [])]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "GRADING_CHAOS_TIMING": "production"})
    rows = []
    for line in run.stdout.splitlines():
        match = LINE.search(line)
        if match:
            print(line[match.start():])
            submit = SUBMIT.search(line)
            rows.append((match["fault"], float(match["seconds"]), match["paid"],
                         float(submit["seconds"]) if submit else None))
    print(f"\nproduction defaults; target ≤ {TARGET_SECONDS:.0f} s to graded, observed and coded, "
          f"submit ≤ {SUBMIT_TARGET:.0f} s")
    print(f"  {'fault':50s} {'seconds':>8s} {'paid/episode':>13s} {'submit s':>9s}  verdict")
    for fault, seconds, paid, submit in rows:
        ok = seconds <= TARGET_SECONDS and (submit is None or submit <= SUBMIT_TARGET)
        print(f"  {fault:50s} {seconds:8.1f} {paid:>13s} {'' if submit is None else f'{submit:.2f}':>9s}  "
              f"{'within target' if ok else 'OVER TARGET'}")
    print(f"\nmachine load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{time.monotonic() - began:.0f} s in all")
    if run.returncode != 0:
        print(run.stdout[-6000:], file=sys.stderr)
        return run.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())

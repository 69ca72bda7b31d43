"""Print grading recovery per fault with the production defaults (60 s lease, 60 s sweep, real retry counts).

Faults: pool child killed, worker main process killed (its supervisor restarts it), broker restarted with a
message unacknowledged (nothing restarts the worker but its supervisor), the same on a ``rediss://`` URL (a
redis-server that speaks only TLS, certificate checked: the surviving transport must hold there too), broker
down mid-grade and at submit, one message delivered three times, one provider down for good then back (held,
then graded by itself: no staff retry), both providers down for four minutes then back (waiting, never failed,
graded by itself), Redis frozen with SIGSTOP (submit, next page and staff overview timed while frozen; graded
after SIGCONT). Recovery of the provider and Redis faults is timed from the moment the fault ends (provider
answering, SIGCONT). For each: seconds from the fault until every episode is graded, observed and coded (target
≤ 180 s), paid calls per episode (one per judge and one coding, plus replies a killed worker lost), and each page
timed during a broker outage or freeze against its 1 s target, with the machine's load.

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
FROZEN = re.compile(r"while frozen: submit (?P<submit>\d+\.\d+) s, next page (?P<next>\d+\.\d+) s, "
                    r"staff overview (?P<overview>\d+\.\d+) s")
BASELINE = re.compile(r"Redis answering: submit (?P<submit>\d+\.\d+) s, next page (?P<next>\d+\.\d+) s, "
                      r"staff overview (?P<overview>\d+\.\d+) s")
LOAD = re.compile(r"load (?P<load>\d+\.\d+)$")
TARGET_SECONDS, SUBMIT_TARGET = 180.0, 1.0
PAGE_NAMES = {1: ["submit"], 3: ["submit", "next page", "staff overview"]}


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
            submit, frozen, load = SUBMIT.search(line), FROZEN.search(line), LOAD.search(line)
            pages = ([float(submit["seconds"])] if submit else
                     [float(frozen[k]) for k in ("submit", "next", "overview")] if frozen else [])
            baseline = BASELINE.search(line)
            rows.append((match["fault"], float(match["seconds"]), match["paid"], pages,
                         load["load"] if load else "?",
                         [float(baseline[k]) for k in ("submit", "next", "overview")] if baseline else []))
    print(f"\nproduction defaults; bound ≤ {TARGET_SECONDS:.0f} s to graded, observed and coded (after the fault ends: "
          f"provider back, Redis thawed), each page ≤ {SUBMIT_TARGET:.0f} s during the outage")
    print(f"  {'fault':58s} {'seconds':>8s} {'bound':>6s} {'paid/episode':>13s} {'pages s':>16s} {'load':>5s}  verdict")
    for fault, seconds, paid, pages, load, baseline in rows:
        ok = seconds <= TARGET_SECONDS and all(p <= SUBMIT_TARGET for p in pages)
        shown = "/".join(f"{p:.2f}" for p in pages)
        print(f"  {fault:58s} {seconds:8.1f} {TARGET_SECONDS:6.0f} {paid:>13s} {shown:>16s} {load:>5s}  "
              f"{'within bound' if ok else 'OVER BOUND'}")
        names = PAGE_NAMES.get(len(pages), [])
        for i, (name, page) in enumerate(zip(names, pages, strict=True)):
            answering = f"  (Redis answering, moments before: {baseline[i]:.2f} s)" if baseline else ""
            print(f"      {name:21s} {page:6.2f} s  bound {SUBMIT_TARGET:.0f} s  load {load:>5s}  "
                  f"{'within bound' if page <= SUBMIT_TARGET else 'OVER BOUND'}{answering}")
    print(f"\nmachine load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{time.monotonic() - began:.0f} s in all")
    if run.returncode != 0:
        print(run.stdout[-6000:], file=sys.stderr)
        return run.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())

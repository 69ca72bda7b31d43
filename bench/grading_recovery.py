"""Print grading recovery times per fault: pool child killed, worker killed, broker outage, triple delivery,
provider failing for good.

Runs the chaos scenarios of tests/grading/test_flow_grading_chaos.py (real workers, a private redis-server the
scenario kills and restarts, PostgreSQL, the fake providers; 4 s leases, 2 s sweep) and prints the measured
times. Needs DATABASE_URL (PostgreSQL) and REDIS_URL like the test suite:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench REDIS_URL=redis://127.0.0.1:6379/2 \\
        .venv/bin/python bench/grading_recovery.py [--repeat 3]

With production settings the bound is one lease (60 s) + one sweep interval (60 s) + a grading pass.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"RECOVERY (?P<fault>[^:]+): (?P<seconds>\d+\.\d+) s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    times: dict[str, list[float]] = defaultdict(list)
    for _ in range(args.repeat):
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
             "tests/grading/test_flow_grading_chaos.py"], cwd=ROOT, capture_output=True, text=True)
        for line in run.stdout.splitlines():
            match = LINE.search(line)
            if match:
                times[match["fault"]].append(float(match["seconds"]))
                print(line[match.start():])
        if run.returncode != 0:
            print(run.stdout[-3000:], file=sys.stderr)
            return run.returncode
    print("\nrecovery (s), fault -> min / max over", args.repeat, "run(s)")
    for fault, values in times.items():
        print(f"  {fault:50s} {min(values):6.1f} / {max(values):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Bench: where a launch's server time goes — CPU and queries of every request of one recruit's journey, and of
the staff overview and leaderboard, measured in-process through Django's full middleware stack.

Why: on a loaded machine wall-clock latency measures the neighbours; the CPU the serving thread used and the
queries a view sent are what the code controls. One request costs the same alone as under load (give or take
cache warmth), so the launch bench's server-CPU target (median ≤ 15 ms per worker request) can be checked here
per view, quickly, and the offenders named.

Runs against DATABASE_URL (the demo study is loaded and opened if missing; recruits get fresh platform ids).

    python bench/worker_flow.py [--recruits 3] [--staff-refreshes 5] [--cohorts 1] [--link open|personal]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")

TARGET_CPU_MS = 15.0


class ProfiledClient:
    """The journey's Http protocol over Django's test client, recording CPU ms and queries per step."""

    def __init__(self, samples: dict) -> None:
        from django.test import Client

        self.client = Client(enforce_csrf_checks=True)
        self.samples = samples

    def csrf(self) -> str:
        cookie = self.client.cookies.get("csrftoken")
        return cookie.value if cookie else ""

    def request(self, step, method, path, *, data=None, files=None, headers=None):
        from django.core.files.uploadedfile import SimpleUploadedFile
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        payload = dict(data or {})
        for field, (name, content, content_type) in (files or {}).items():
            payload[field] = SimpleUploadedFile(name, content, content_type)
        with CaptureQueriesContext(connection) as queries:
            started = time.thread_time()
            call = self.client.get if method == "GET" else self.client.post
            response = call(path, payload, headers=headers or {})
            if hasattr(response, "streaming_content"):  # downloads stream after the view returns
                b"".join(response.streaming_content)
            cpu = (time.thread_time() - started) * 1000
        self.samples[step].append((cpu, len(queries)))
        return response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recruits", type=int, default=3)
    parser.add_argument("--staff-refreshes", type=int, default=5)
    parser.add_argument("--link", choices=("open", "personal"), default="open",
                        help="the study's open link with a Prolific id (default, as a recruitment platform sends "
                             "recruits), or signed personal links")
    parser.add_argument("--cohorts", type=int, default=1,
                        help="also print each step's median CPU per cohort of recruits (does a page's cost grow "
                             "with the study?)")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from bench.launch_flow import launch_journey
    from bench.launch_study import prepare_study, recruits, survey_spec

    settings.JOIN_THROTTLE_RATE = "100000/min"  # every recruit arrives from this one address here
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    study = prepare_study(arrivals=args.recruits)
    spec = survey_spec(study)
    samples: dict[str, list[tuple[float, int]]] = defaultdict(list)
    run = f"prof{uuid.uuid4().hex[:6]}"
    cohort_size = max(1, -(-args.recruits // max(1, args.cohorts)))
    by_cohort: list[dict[str, list[tuple[float, int]]]] = []
    for n, recruit in enumerate(recruits(study, run=run, count=args.recruits, link=args.link)):
        if n % cohort_size == 0:
            by_cohort.append(defaultdict(list))
        cohort = by_cohort[-1]
        launch_journey(ProfiledClient(cohort), recruit, spec, password=os.environ.get("BENCH_PASSWORD", ""))
    for cohort in by_cohort:
        for step, values in cohort.items():
            samples[step].extend(values)

    staff = Client()
    staff.force_login(get_user_model().objects.get(username="demo-staff"))
    for name, url in (("staff-overview", reverse("dashboard:overview", args=[study.slug])),
                      ("staff-leaderboard", reverse("dashboard:leaderboard", args=[study.slug]))):
        probe = ProfiledClient(samples)
        probe.client = staff
        for _ in range(args.staff_refreshes):
            assert probe.request(name, "GET", url).status_code == 200

    rows = {}
    for step, values in samples.items():
        cpu = [c for c, _ in values]
        rows[step] = {"n": len(values), "cpu_ms_median": round(statistics.median(cpu), 1),
                      "cpu_ms_max": round(max(cpu), 1), "queries_max": max(q for _, q in values)}
    worker = [c for step, values in samples.items() if not step.startswith("staff") for c, _ in values]
    growth = {}
    if len(by_cohort) > 1:
        growth = {step: [round(statistics.median(c for c, _ in cohort[step]), 1) for cohort in by_cohort]
                  for step in by_cohort[0]}
    print(json.dumps({
        "steps": rows,
        **({"cpu_ms_median_by_cohort": growth, "cohort_size": cohort_size} if growth else {}),
        "link": args.link,
        "worker_request_cpu_ms_median": round(statistics.median(worker), 1), "target_cpu_ms": TARGET_CPU_MS,
        "load": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
    }, indent=1))


if __name__ == "__main__":
    main()

"""Locust users for `bench/launch.py` (run by it as ``locust -f bench/launch_locust.py``; not on its own).

The plan (recruits, survey answers, think time, staff account) comes from the JSON file named by
``LAUNCH_PLAN``; every request's latency, status and the server's own cost (``Server-Timing``: thread CPU and
queries) go to the JSON file named by ``LAUNCH_RESULTS`` when the run stops, with this process's CPU time.
A browser keeps the hashed static files a year (immutable), so each user fetches each one once.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from pathlib import Path

import gevent
from locust import HttpUser, between, events, task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.launch_flow import FlowError, Recruit, keep_working, launch_journey  # noqa: E402

PLAN = json.loads(Path(os.environ["LAUNCH_PLAN"]).read_text())
RESULTS: dict = {"requests": [], "errors": [], "busy": 0, "journeys_done": 0}
_recruits = enumerate(PLAN["recruits"])
_STATIC = re.compile(r'(?:href|src)="(/static/[^"]+)"')
_TIMING = re.compile(r"cpu;dur=([\d.]+), db;desc=\"queries\";dur=(\d+)")
_started = {"wall": time.time(), "cpu": 0.0}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@events.test_start.add_listener
def _on_start(**_kwargs) -> None:
    _started.update(wall=time.time(), cpu=_cpu())


@events.quitting.add_listener
def _on_quit(**_kwargs) -> None:
    wall = time.time() - _started["wall"]
    RESULTS["generator"] = {"cpu_seconds": _cpu() - _started["cpu"], "wall_seconds": wall}
    Path(os.environ["LAUNCH_RESULTS"]).write_text(json.dumps(RESULTS))


class LocustHttp:
    """The journey's Http protocol over a locust client: named requests, the server's cost recorded, one
    fetch per static file, and the client's small retry on a "busy" answer (503 + Retry-After)."""

    def __init__(self, user: HttpUser) -> None:
        self.user = user
        self.static_seen: set[str] = set()

    def csrf(self) -> str:
        return self.user.client.cookies.get("csrftoken", "")

    def request(self, step, method, path, *, data=None, files=None, headers=None):
        for attempt in range(4):
            started = time.perf_counter()
            response = self.user.client.request(
                method, path, name=step, params=data if method == "GET" else None,
                data=None if method == "GET" else data, files=files, headers=headers or {},
                allow_redirects=False)
            self._record(step, response, time.perf_counter() - started)
            if response.status_code != 503 or attempt == 3:
                break
            RESULTS["busy"] += 1
            gevent.sleep(min(10, int(response.headers.get("Retry-After", "5"))))
        if method == "GET" and "text/html" in response.headers.get("Content-Type", ""):
            self._static(response.text)
        return response

    def _record(self, step: str, response, seconds: float) -> None:
        timing = _TIMING.search(response.headers.get("Server-Timing", ""))
        RESULTS["requests"].append([step, round(seconds * 1000, 2), response.status_code,
                                    float(timing.group(1)) if timing else None,
                                    int(timing.group(2)) if timing else None, time.time()])

    def _static(self, html: str) -> None:
        for url in _STATIC.findall(html):
            if url not in self.static_seen:
                self.static_seen.add(url)
                started = time.perf_counter()
                response = self.user.client.get(url, name="static")
                self._record("static", response, time.perf_counter() - started)


def _pause(seconds: float) -> None:
    gevent.sleep(seconds * PLAN["think"])


class Recruit_(HttpUser):
    """One recruit of the launch: arrives at its planned moment, walks the whole journey once, then stays idle.

    Arrivals follow the plan's clock (recruit n at ``n × arrival_interval`` seconds), not locust's spawning:
    locust keeps the number of running users at its ramp's target, so a user that stopped after its journey
    was replaced at once, and arrivals ran at the spawn rate plus the rate journeys finished (up to 3.7 a
    second in a run planned at 1.67). Users are spawned ahead of their arrival and wait.
    """

    weight = PLAN.get("recruit_weight", 1)
    fixed_count = 0
    wait_time = between(0, 0)

    @task
    def journey(self) -> None:
        try:
            n, plan = next(_recruits)
        except StopIteration:
            self._idle()
        gevent.sleep(max(0.0, _started["wall"] + n * PLAN["arrival_interval"] - time.time()))
        recruit = Recruit(**plan)
        try:
            launch_journey(LocustHttp(self), recruit, PLAN["survey"], pause=_pause)
        except FlowError as exc:
            RESULTS["errors"].append(str(exc))
        except Exception as exc:  # noqa: BLE001 - a connection reset is an error of the run, not of the bench
            RESULTS["errors"].append(f"{type(exc).__name__}: {exc}")
        RESULTS["journeys_done"] += 1
        if RESULTS["journeys_done"] >= len(PLAN["recruits"]) and not PLAN.get("duration"):
            # From its own greenlet: quitting stops every user, this one included.
            gevent.spawn_later(0.5, self.environment.runner.quit)
        if PLAN.get("steady"):
            self._keep_working(recruit)
        self._idle()

    def _idle(self) -> None:
        """Stay until the run ends: a stopped user would be replaced by a new arrival."""
        while True:
            gevent.sleep(60)

    def _keep_working(self, recruit: Recruit) -> None:
        """Steady state: an enrolled participant finishes task 2 and goes on through the session's tasks,
        uploading 5 MB deliverables, until the run's duration is over."""
        deadline = _started["wall"] + PLAN["duration"]
        try:
            keep_working(LocustHttp(self), recruit, last_position=PLAN.get("tasks_per_session", 5), pause=_pause,
                         deliverable_bytes=5 << 20, log_bytes=200 * 1024, until=lambda: time.time() >= deadline)
        except FlowError as exc:
            RESULTS["errors"].append(f"steady {exc}")


class Staff(HttpUser):
    """A coordinator refreshing the overview and the leaderboard during the run."""

    fixed_count = PLAN.get("staff", 0)
    wait_time = between(4, 6)

    def on_start(self) -> None:
        self.client.get("/admin/login/", name="staff-login-page")
        self.client.post("/admin/login/", name="staff-login", allow_redirects=False, data={
            "username": PLAN["staff_username"], "password": PLAN["staff_password"], "next": "/admin/",
            "csrfmiddlewaretoken": self.client.cookies.get("csrftoken", "")})
        self.http = LocustHttp(self)

    @task
    def refresh(self) -> None:
        if time.time() > _started["wall"] + PLAN.get("duration", 0):
            while True:  # until the run ends: a stopped user would be replaced
                gevent.sleep(60)
        self.http.request("staff-overview", "GET", f"/admin/dashboard/{PLAN['study_slug']}/")
        self.http.request("staff-leaderboard", "GET", f"/admin/dashboard/{PLAN['study_slug']}/leaderboard/")

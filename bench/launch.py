"""Bench: a study launch on one machine — recruits arriving by the study's open link with a Prolific id (as a
recruitment platform sends every recruit to one URL; ``--link personal`` for signed personal links) and walking
the real journey (CSRF, occupation search, autosaved pre-survey, reference download, 1 MB deliverable + 200 KB
log uploads, review, submit, task 2 opened) through ``deploy/nginx.conf`` in front of gunicorn from
``gunicorn.conf.py``, as operators deploy it (``--no-proxy``: gunicorn alone), driven by locust.

Why: a launch sends hundreds of participants within minutes; every click should answer within a second while
a coordinator watches the overview. Targets (issue 28): every worker step p95 ≤ 1 s and p99 ≤ 2 s, sign-up
p95 ≤ 1 s, 0 errors, staff overview and leaderboard p95 ≤ 1 s, server CPU per worker request (median)
≤ 15 ms. Latency on a shared machine depends on the neighbours, so the machine load is printed beside every
figure, and the server's own CPU per request (the serving thread's CPU time, from the Server-Timing header)
and query counts are printed per step: those do not depend on the load.

Stack (free loopback ports): Debian's nginx with deploy/nginx.conf (static files from collectstatic's
output, arrival stamps, buffered uploads; TRUSTED_PROXY_COUNT=1), gunicorn from gunicorn.conf.py, one Celery
worker, PostgreSQL and Redis from DATABASE_URL / REDIS_URL, the load generator on the same machine (its own
CPU printed). PostgreSQL's lock waits are sampled twice a second during the run (backends waiting on a lock:
how often, how many at most). Afterwards the integrity check: participants = platform ids, every upload
byte-identical, one payment per submitted task, no duplicates.

    DATABASE_URL=postgres://… REDIS_URL=redis://…/N python bench/launch.py --scenario burst200
    scenarios: burst200 (200 arrivals in 120 s), launch600 (600 in 5 min), launch1000 (1 000 in 10 min),
               steady100 (100 enrolled keep working, 3 staff refreshing, 5 min)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
BIN = Path(sys.executable).parent

SCENARIOS = {
    "burst200": {"arrivals": 200, "over_seconds": 120, "staff": 0, "steady": False},
    "launch600": {"arrivals": 600, "over_seconds": 300, "staff": 0, "steady": False},
    "launch1000": {"arrivals": 1000, "over_seconds": 600, "staff": 0, "steady": False},
    "steady100": {"arrivals": 100, "over_seconds": 60, "staff": 3, "steady": True, "duration": 300},
}
TARGETS = {"p95_ms": 1000, "p99_ms": 2000, "signup_p95_ms": 1000, "cpu_ms_median": 15.0, "staff_p95_ms": 1000}
STAFF_STEPS = {"staff-overview", "staff-leaderboard", "staff-login", "staff-login-page"}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


class CpuSampler(threading.Thread):
    """CPU seconds used by process groups -- gunicorn's tree, the Celery worker's tree and PostgreSQL (every
    database of the cluster: a neighbour's queries count too) -- and the highest one-minute load seen. Where
    the machine's two cores went is what a miss needs.

    A group's total is its root's own time, the time of the children it has reaped (a recycled gunicorn worker,
    a PostgreSQL backend whose connection closed) and that of its live children, read at the start and the end
    only: scanning every process twice a second cost the bench a fifth of a core.
    """

    def __init__(self, *, server: int, worker: int) -> None:
        super().__init__(daemon=True)
        import psutil

        self.roots = {"server": psutil.Process(server), "celery": psutil.Process(worker),
                      "postgres": self._postmaster()}
        self.max_load = 0.0
        self.running = True

    @staticmethod
    def _postmaster():
        import psutil

        for process in psutil.process_iter(["name", "ppid"]):
            if process.info["name"] in ("postgres", "postmaster"):
                try:
                    parent = process.parent()
                except psutil.NoSuchProcess:
                    continue
                if parent is None or parent.name() not in ("postgres", "postmaster"):
                    return process
        return None

    @staticmethod
    def _tree_seconds(root) -> float:
        import psutil

        if root is None:
            return 0.0
        try:
            own = root.cpu_times()
            total = own.user + own.system + own.children_user + own.children_system
            for child in root.children(recursive=True):
                try:
                    times = child.cpu_times()
                    total += times.user + times.system
                except psutil.NoSuchProcess:
                    pass
            return total
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return 0.0

    def run(self) -> None:
        while self.running:
            self.max_load = max(self.max_load, os.getloadavg()[0])
            time.sleep(1.0)

    def totals(self) -> dict[str, float]:
        return {group: self._tree_seconds(root) for group, root in self.roots.items()}


class LockSampler(threading.Thread):
    """Backends of the bench's database waiting on a lock, sampled every half second (a bounded loop: it stops
    when the run does): the samples that saw a wait, and the most waiters at once."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.running = True
        self.samples = self.waiting_samples = self.max_waiters = 0

    def run(self) -> None:
        from django.db import connection

        try:
            while self.running:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                   "AND datname = current_database()")
                    waiters = cursor.fetchone()[0]
                self.samples += 1
                self.waiting_samples += waiters > 0
                self.max_waiters = max(self.max_waiters, waiters)
                time.sleep(0.5)
        finally:
            connection.close()

    def report(self) -> dict:
        return {"samples": self.samples, "samples_with_lock_waits": self.waiting_samples,
                "max_backends_waiting": self.max_waiters}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_proxy(*, upstream: int, static_root: Path, work: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """deploy/nginx.conf as shipped, with only its deployment names replaced (upstream, port, folders)."""
    import shutil

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise SystemExit("nginx is not installed (apt-get install -y nginx, or make nginx); or pass --no-proxy.")
    port = _free_port()
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    for old, new in (("server web:8000;", f"server 127.0.0.1:{upstream};"),
                     ("listen 80;", f"listen 127.0.0.1:{port};"),
                     ("/srv/static", str(static_root)), ("/tmp/nginx-body", str(work / "nginx-body"))):
        conf = conf.replace(old, new)
    (work / "nginx.conf").write_text(conf)
    process = subprocess.Popen([nginx, "-c", str(work / "nginx.conf"), "-p", str(work), "-e", str(log), "-g",
                                f"daemon off; pid {work / 'nginx.pid'}; error_log {log};"],
                               cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    return process, port


def _start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _wait_ready(url: str, seconds: float = 300) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the server did not answer {url} within {seconds} s")


def _summary(results: dict) -> dict:
    by_step: dict[str, list] = defaultdict(list)
    for step, ms, status, cpu, queries, _at in results["requests"]:
        by_step[step].append((ms, status, cpu, queries))
    steps = {}
    for step, rows in by_step.items():
        latencies = [r[0] for r in rows]
        cpus = [r[2] for r in rows if r[2] is not None]
        steps[step] = {
            "n": len(rows), "p50_ms": round(_percentile(latencies, 50)), "p95_ms": round(_percentile(latencies, 95)),
            "p99_ms": round(_percentile(latencies, 99)), "errors": sum(1 for r in rows if r[1] >= 400 or r[1] == 0),
            "busy_503": sum(1 for r in rows if r[1] == 503),
            "server_cpu_ms_median": round(statistics.median(cpus), 1) if cpus else None,
            "queries_max": max((r[3] for r in rows if r[3] is not None), default=None),
        }
    worker_rows = [r for step, rows in by_step.items() if step not in STAFF_STEPS | {"static"} for r in rows]
    worker_cpu = [r[2] for r in worker_rows if r[2] is not None]
    return {"steps": steps, "requests": len(results["requests"]),
            "worker_requests": len(worker_rows),
            "worker_server_cpu_ms_median": round(statistics.median(worker_cpu), 1) if worker_cpu else None}


def _arrival_window(results: dict) -> float:
    joins = sorted(at for step, _ms, _status, _cpu, _queries, at in results["requests"] if step == "join")
    return round(joins[-1] - joins[0], 1) if len(joins) > 1 else 0.0


def _by_minute(results: dict) -> list[dict]:
    """Worker requests per minute of the run: how many, their p95 and the server CPU median -- whether a queue
    built up and when, and whether a request cost more CPU as the run went on."""
    rows = [(at, ms, cpu) for step, ms, _status, cpu, _queries, at in results["requests"]
            if step not in STAFF_STEPS | {"static"}]
    if not rows:
        return []
    start = min(at for at, _, _ in rows)
    minutes: dict[int, list] = defaultdict(list)
    for at, ms, cpu in rows:
        minutes[int((at - start) // 60)].append((ms, cpu))
    return [{"minute": minute, "n": len(values), "p95_ms": round(_percentile([ms for ms, _ in values], 95)),
             "cpu_ms_median": round(statistics.median(c for _, c in values if c is not None), 1)
             if any(c is not None for _, c in values) else None}
            for minute, values in sorted(minutes.items())]


def _verdict(summary: dict, journey_errors: int) -> dict:
    steps = summary["steps"]
    worker = {k: v for k, v in steps.items() if k not in STAFF_STEPS}
    staff = {k: v for k, v in steps.items() if k in ("staff-overview", "staff-leaderboard")}
    return {
        "every_worker_step_p95_le_1s": all(v["p95_ms"] <= TARGETS["p95_ms"] for v in worker.values()),
        "every_worker_step_p99_le_2s": all(v["p99_ms"] <= TARGETS["p99_ms"] for v in worker.values()),
        "signup_p95_le_1s": steps.get("signup", {}).get("p95_ms", 10**9) <= TARGETS["signup_p95_ms"],
        "staff_p95_le_1s": all(v["p95_ms"] <= TARGETS["staff_p95_ms"] for v in staff.values()) if staff else None,
        "worker_cpu_median_le_15ms": (summary["worker_server_cpu_ms_median"] or 10**9) <= TARGETS["cpu_ms_median"],
        "zero_errors": journey_errors == 0 and all(v["errors"] == 0 for v in steps.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="burst200")
    parser.add_argument("--port", type=int, default=0, help="gunicorn's port (default: a free one)")
    parser.add_argument("--link", choices=("open", "personal"), default="open",
                        help="the study's open link with a Prolific id (default), or signed personal links")
    parser.add_argument("--no-proxy", action="store_true", help="gunicorn alone, without deploy/nginx.conf")
    parser.add_argument("--no-collectstatic", action="store_true",
                        help="serve the files an earlier run collected (collecting takes minutes on a busy machine)")
    parser.add_argument("--think", type=float, default=1.0, help="think-time multiplier (1 = a brisk person)")
    parser.add_argument("--arrivals", type=int, help="override the scenario's number of arrivals")
    parser.add_argument("--over-seconds", type=int, help="override the scenario's arrival window in seconds")
    parser.add_argument("--duration", type=int, help="override steady100's duration in seconds")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    # A stop (Ctrl-C, timeout) still ends the servers this bench started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"):
        raise SystemExit("Set DATABASE_URL (PostgreSQL) and REDIS_URL: the bench runs the production stack.")
    scenario = dict(SCENARIOS[args.scenario])
    if args.arrivals:
        scenario["arrivals"] = args.arrivals
    if args.over_seconds:
        scenario["over_seconds"] = args.over_seconds
    if args.duration and scenario["steady"]:
        scenario["duration"] = args.duration

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from bench.launch_study import integrity_check, prepare_study, recruits, survey_spec
    from console.demo import DEMO_PASSWORD

    # Steady-state workers go on through their whole session (tasks_per_session), the others open two tasks.
    study = prepare_study(arrivals=scenario["arrivals"], tasks_each=None if scenario["steady"] else 2)
    if not args.no_collectstatic:
        call_command("collectstatic", "--noinput", "-v", "0")
    run = f"l{uuid.uuid4().hex[:6]}"
    plan = {
        "recruits": [r.__dict__ for r in recruits(study, run=run, count=scenario["arrivals"], link=args.link)],
        "survey": survey_spec(study), "think": args.think, "study_slug": study.slug,
        "staff": scenario["staff"], "staff_username": "demo-staff", "staff_password": DEMO_PASSWORD,
        "steady": scenario["steady"], "duration": scenario.get("duration"),
        "tasks_per_session": study.tasks_per_session,
        # Recruit n arrives n × this many seconds after the start (bench/launch_locust.py keeps the schedule).
        "arrival_interval": scenario["over_seconds"] / scenario["arrivals"],
    }
    work = Path(tempfile.mkdtemp(prefix="launch-bench-", dir=settings.VAR_DIR))
    work.chmod(0o755)  # nginx's workers run as another user
    (work / "plan.json").write_text(json.dumps(plan))
    port = args.port or _free_port()

    env = {**os.environ, "SERVER_TIMING": "1", "DJANGO_DEBUG": "0",
           "GUNICORN_BIND": f"127.0.0.1:{port}", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
           "TRUSTED_PROXY_COUNT": "0" if args.no_proxy else "1",
           # Every simulated recruit arrives from 127.0.0.1; the per-address limit on invitation links is
           # meant for one real network, not for a whole launch.
           "JOIN_THROTTLE_RATE": "100000/min"}
    server = _start([str(BIN / "gunicorn"), "--config", "gunicorn.conf.py", "studyapp.wsgi:application"],
                    env, work / "gunicorn.log")
    proxy, entry = None, port
    if not args.no_proxy:
        proxy, entry = _start_proxy(upstream=port, static_root=Path(settings.STATIC_ROOT), work=work,
                                    log=work / "nginx.log")
    worker = _start([str(BIN / "celery"), "-A", "studyapp", "worker", "-Q", "default,grading,rating", "-c", "1",
                     "--loglevel", "WARNING", "-n", f"launch-bench-{run}@%h"], env, work / "celery.log")
    try:
        _wait_ready(f"http://127.0.0.1:{entry}/accounts/login/")
        # Warm every worker process (imports, templates, URL conf) as a server that has run a while is;
        # opening an invitation page creates nothing.
        for _ in range(24):
            _wait_ready(f"http://127.0.0.1:{entry}{plan['recruits'][0]['join_path']}")
        sampler = CpuSampler(server=server.pid, worker=worker.pid)
        sampler.start()
        locks = LockSampler()
        locks.start()
        load_before = os.getloadavg()
        cpu_before, started = sampler.totals(), time.time()
        users = scenario["arrivals"] + scenario["staff"]
        rate = scenario["arrivals"] / scenario["over_seconds"]
        run_time = scenario.get("duration") or scenario["over_seconds"] + 600
        locust = subprocess.run(
            [str(BIN / "locust"), "-f", str(ROOT / "bench" / "launch_locust.py"),
             *(["Recruit_", "Staff"] if scenario["staff"] else ["Recruit_"]), "--headless", "-u", str(users),
             # Users are spawned ahead of their planned arrival and wait for it (the plan's clock sets the
             # arrival rate, not locust's spawning).
             "-r", f"{max(4 * rate, 5.0):.4f}", "--run-time", f"{int(run_time)}s",
             "--host", f"http://127.0.0.1:{entry}", "--only-summary", "--loglevel", "WARNING",
             "--stop-timeout", "60"],
            cwd=ROOT, env={**env, "LAUNCH_PLAN": str(work / "plan.json"),
                           "LAUNCH_RESULTS": str(work / "results.json")},
            stdout=(work / "locust.log").open("wb"), stderr=subprocess.STDOUT)
        elapsed = time.time() - started
        cpu_after = sampler.totals()
        cores = {group: round((cpu_after[group] - cpu_before[group]) / elapsed, 2) for group in cpu_after}
        server_cpu = cpu_after["server"] - cpu_before["server"]
        sampler.running = locks.running = False
        locks.join(timeout=5)
        load_after = os.getloadavg()
    finally:
        started_here = [p for p in (proxy, server, worker) if p is not None]
        for process in started_here:
            process.terminate()
        for process in started_here:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    results = json.loads((work / "results.json").read_text())
    summary = _summary(results)
    generator = results["generator"]
    report = {
        "scenario": args.scenario, "arrivals": scenario["arrivals"], "think": args.think, "link": args.link,
        "through": "gunicorn alone" if args.no_proxy else "deploy/nginx.conf in front of gunicorn",
        "lock_waits": locks.report(),
        "locust_exit": locust.returncode, "elapsed_s": round(elapsed, 1),
        "requests_per_s": round(summary["requests"] / elapsed, 1),
        # The arrivals as they happened: the first and last join and how many per second came in between.
        "arrival_window_s": _arrival_window(results),
        "journeys_done": results["journeys_done"], "journey_errors": len(results["errors"]),
        "journey_error_samples": sorted(set(results["errors"]))[:5], "busy_retries": results["busy"],
        "server_cores_used": round(server_cpu / elapsed, 2),
        "server_cpu_ms_per_request": round(1000 * server_cpu / max(1, summary["requests"]), 1),
        "worker_server_cpu_ms_median": summary["worker_server_cpu_ms_median"],
        "generator_cores_used": round(generator["cpu_seconds"] / generator["wall_seconds"], 3),
        "celery_cores_used": cores["celery"], "postgres_cores_used": cores["postgres"],
        "by_minute": _by_minute(results),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "load_max_1min": round(sampler.max_load, 2), "cpus": os.cpu_count(),
        "steps": summary["steps"], "targets": TARGETS,
        "integrity": integrity_check(study, run=run, arrivals=scenario["arrivals"]),
        "logs": str(work),
    }
    report["verdict"] = _verdict(summary, len(results["errors"]))
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text)
    print(_table(report))
    print(text)


def _table(report: dict) -> str:
    lines = [f"{'step':22s} {'n':>5s} {'p50':>6s} {'p95':>6s} {'p99':>6s} {'err':>4s} {'cpu ms':>7s} {'queries':>7s}"]
    for step, row in report["steps"].items():
        cpu = "-" if row["server_cpu_ms_median"] is None else row["server_cpu_ms_median"]
        queries = "-" if row["queries_max"] is None else row["queries_max"]
        lines.append(f"{step:22s} {row['n']:5d} {row['p50_ms']:6d} {row['p95_ms']:6d} {row['p99_ms']:6d} "
                     f"{row['errors']:4d} {cpu:>7} {queries:>7}")
    lines.append(f"{report['arrivals']} arrivals over {report['arrival_window_s']} s by the {report['link']} link, "
                 f"through {report['through']}")
    waits = report["lock_waits"]
    lines.append(f"lock waits: {waits['samples_with_lock_waits']} of {waits['samples']} samples saw a backend waiting "
                 f"on a lock, at most {waits['max_backends_waiting']} at once")
    lines.append(f"load before {report['load_before']} after {report['load_after']} max {report['load_max_1min']} "
                 f"on {report['cpus']} CPUs; generator {report['generator_cores_used']} cores; server "
                 f"{report['server_cores_used']} cores, {report['server_cpu_ms_per_request']} ms CPU per request; "
                 f"celery {report['celery_cores_used']} cores; postgres {report['postgres_cores_used']} cores")
    for row in report["by_minute"]:
        lines.append(f"  minute {row['minute']:3d}: {row['n']:5d} worker requests, p95 {row['p95_ms']:6d} ms, "
                     f"server CPU median {row['cpu_ms_median']} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

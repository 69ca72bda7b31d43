"""The documented production stack serves static files from the proxy, stamps arrivals for the overload
answer, and sizes gunicorn from the machine it runs on."""

from __future__ import annotations

import os
import runpy

import yaml

from tests.conftest import ROOT


def test_the_proxy_serves_the_collected_static_files_without_a_python_worker():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    proxy, web, migrate = services["proxy"], services["web"], services["migrate"]
    assert "8000:80" in proxy["ports"] and "ports" not in web, "clients reach gunicorn only through the proxy"
    assert "static:/srv/static:ro" in proxy["volumes"]
    assert "static:/app/static" in web["volumes"] and "static:/app/static" in migrate["volumes"]
    assert "collectstatic" in " ".join(migrate["command"]), "every deploy refreshes the files the proxy serves"
    assert "STATIC_ROOT=/app/static" in (ROOT / "Dockerfile").read_text()
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "location /static/" in conf and "alias /srv/static/;" in conf
    assert 'add_header Cache-Control "public, max-age=31536000, immutable"' in conf
    assert "busy.html" in conf and (ROOT / "static" / "busy.html").exists()


def test_the_proxy_stamps_each_request_for_the_overload_answer_and_buffers_uploads():
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert 'proxy_set_header X-Request-Start "t=${msec}";' in conf
    assert "proxy_request_buffering on;" in conf
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert services["web"]["environment"]["TRUSTED_PROXY_COUNT"] == "${TRUSTED_PROXY_COUNT:-1}"


def test_gunicorn_runs_one_worker_per_cpu_plus_one(monkeypatch):
    monkeypatch.delenv("GUNICORN_WORKERS", raising=False)
    monkeypatch.delenv("GUNICORN_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (conf["workers"], conf["threads"], conf["worker_class"]) == (3, 8, "gthread")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert runpy.run_path(str(ROOT / "gunicorn.conf.py"))["workers"] == 9
    monkeypatch.setenv("GUNICORN_WORKERS", "2")
    assert runpy.run_path(str(ROOT / "gunicorn.conf.py"))["workers"] == 2


def test_workers_are_forked_preloaded_never_recycled_and_keep_connections_past_a_pause(monkeypatch):
    for name in ("GUNICORN_MAX_REQUESTS", "GUNICORN_MAX_REQUESTS_JITTER", "GUNICORN_KEEPALIVE", "GUNICORN_PRELOAD"):
        monkeypatch.delenv(name, raising=False)
    conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert conf["preload_app"] is True
    # A recycled worker drops the requests in flight on its kept-alive connections (the launch bench's resets).
    assert (conf["max_requests"], conf["max_requests_jitter"]) == (0, 0)
    monkeypatch.setenv("GUNICORN_MAX_REQUESTS", "50000")
    recycled = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (recycled["max_requests"], recycled["max_requests_jitter"]) == (50000, 25000), "restarts stay apart"
    assert conf["keepalive"] >= 60
    conf["post_worker_init"](None)  # the warm-up a worker runs before serving: cache client and broker transport


def test_env_example_compose_and_readme_agree_on_the_proxy_count():
    """Behind the compose proxy a count of 0 puts every participant on the proxy's address, so one join
    throttle would refuse the whole launch."""
    import re

    example = dict(line.split("=", 1) for line in (ROOT / ".env.example").read_text().splitlines()
                   if line and not line.startswith("#") and "=" in line)
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    compose_default = re.fullmatch(r"\$\{TRUSTED_PROXY_COUNT:-(\d+)\}", services["web"]["environment"]
                                   ["TRUSTED_PROXY_COUNT"]).group(1)
    assert "proxy" in services
    assert example["TRUSTED_PROXY_COUNT"] == compose_default == "1"
    readme_row = next(line for line in (ROOT / "README.md").read_text().splitlines()
                      if line.startswith("| `TRUSTED_PROXY_COUNT`"))
    assert "compose stack" in readme_row and re.search(r"`1` behind one proxy, as in the compose stack", readme_row)
    assert "as in the compose stack); `1`" not in readme_row, "the README must not tell compose users to set 0"


def test_nginx_closes_idle_upstream_connections_before_gunicorn_does(monkeypatch):
    import re

    monkeypatch.delenv("GUNICORN_KEEPALIVE", raising=False)
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    upstream = re.search(r"upstream web \{([^}]*)\}", conf).group(1)
    nginx_idle = re.search(r"keepalive_timeout (\d+)s;", upstream)
    assert nginx_idle, "without it nginx keeps upstream connections 60 s by default, unrelated to gunicorn's"
    assert int(nginx_idle.group(1)) < runpy.run_path(str(ROOT / "gunicorn.conf.py"))["keepalive"]

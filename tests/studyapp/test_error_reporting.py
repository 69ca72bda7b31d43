"""SENTRY_DSN turns on error reporting (sentry-sdk with Django and Celery); unset, the SDK stays off."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from tests.conftest import ROOT, wait_for, worker_environment

_PROBE = """
import json, django, sentry_sdk
django.setup()
client = sentry_sdk.get_client()
integrations = sorted(getattr(client, "integrations", {}) or {})
if client.is_active():
    try:
        raise RuntimeError("reported failure")
    except RuntimeError:
        sentry_sdk.capture_exception()
    sentry_sdk.flush(timeout=10)
print(json.dumps({"active": client.is_active(), "integrations": integrations,
                  "pii": bool(client.options.get("send_default_pii")) if client.is_active() else None}))
"""


def _probe(extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTRY_")}
    env.update({"DJANGO_SETTINGS_MODULE": "studyapp.settings", **extra})
    result = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_without_a_dsn_error_reporting_is_not_initialised():
    assert _probe({})["active"] is False


class _Collector:
    """A local stand-in for the reporting service: a real HTTP server on a free loopback port keeping each body."""

    def __init__(self) -> None:
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                elif self.headers.get("Content-Encoding") == "br":
                    import brotli  # sentry-sdk compresses with brotli when it is installed

                    body = brotli.decompress(body)
                received.append((self.path, body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.dsn = f"http://publickey@127.0.0.1:{self.server.server_port}/42"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector():
    running = _Collector()
    yield running
    running.close()


def test_with_a_dsn_errors_reach_the_reporting_service_without_personal_data(collector):
    state = _probe({"SENTRY_DSN": collector.dsn})
    assert state["active"] is True and state["pii"] is False
    assert {"django", "celery"} <= set(state["integrations"])
    received = collector.received
    assert received and received[0][0].startswith("/api/42/envelope/")
    assert any(b"reported failure" in body for _, body in received)


_SERVE = """
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.core.wsgi import get_wsgi_application


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
print(server.server_port, flush=True)
server.serve_forever()
"""

CANARIES = ("sessioncookie-canary", "csrfcookie-canary", "querytoken-canary", "alice.canary", "example.org",
            "body-canary", "csrfheader-canary", "headervalue-canary", "useragent-canary", "198.51.100.9",
            "db.internal", ":5432")


def _post_failing_request(port: int) -> int:
    """POST to the failing view over real HTTP with personal data in the body, the headers and the cookies."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/error-probe/?token=querytoken-canary",
        data=b"email=alice.canary%40example.org&note=body-canary", method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-CSRFToken": "csrfheader-canary",
                 "X-Probe": "headervalue-canary", "X-Forwarded-For": "198.51.100.9",
                 "User-Agent": "useragent-canary", "Cookie": "sessionid=sessioncookie-canary; "
                                                             "csrftoken=csrfcookie-canary"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _events(received: list[tuple[str, bytes]]) -> list[dict]:
    return [json.loads(line) for _, body in received for line in body.splitlines()
            if line.startswith(b"{") and b'"exception"' in line]


def test_a_500_reaches_the_collector_without_body_cookie_header_email_address_or_local_variable(db, collector):
    env = worker_environment({"SENTRY_DSN": collector.dsn,
                              "DJANGO_SETTINGS_MODULE": "tests.studyapp.error_probe_settings"})
    env = {k: v for k, v in env.items() if not k.startswith("SENTRY_") or k == "SENTRY_DSN"}
    server = subprocess.Popen([sys.executable, "-c", _SERVE], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(server.stdout.readline())
        assert _post_failing_request(port) == 500
        wait_for(lambda: _events(collector.received), timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=30)
    events = _events(collector.received)
    assert len(events) == 1, collector.received
    event = events[0]
    payload = b"\n".join(body for _, body in collector.received).decode()
    # The report still says what failed and where.
    exception = event["exception"]["values"][-1]
    assert exception["type"] == "ConnectionError"
    assert exception["value"] == "could not reach [address] while saving [email] for [address]"
    assert any(frame["function"] == "failing_view" for frame in exception["stacktrace"]["frames"])
    assert event["request"] == {"method": "POST"}
    # And nothing about who sent it, from where, or which machine answered.
    host = socket.gethostname()
    for canary in (*CANARIES, *([host] if len(host) >= 6 else [])):
        assert canary not in payload, canary
    assert "127.0.0.1" not in json.dumps(event)  # the client's address (the collector's is in the envelope header)
    assert "server_name" not in event and "user" not in event
    assert all("vars" not in frame for frame in exception["stacktrace"]["frames"])

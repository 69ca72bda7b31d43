"""SENTRY_DSN turns on error reporting (sentry-sdk with Django and Celery); unset, the SDK stays off."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from tests.conftest import ROOT

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


def test_with_a_dsn_errors_reach_the_reporting_service_without_personal_data():
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
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

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        state = _probe({"SENTRY_DSN": f"http://publickey@127.0.0.1:{server.server_port}/42"})
    finally:
        server.shutdown()
    assert state["active"] is True and state["pii"] is False
    assert {"django", "celery"} <= set(state["integrations"])
    assert received and received[0][0].startswith("/api/42/envelope/")
    assert any(b"reported failure" in body for _, body in received)

"""redis:// and rediss:// (TLS) brokers both get the transport that survives a broker restart, over real TLS."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from studyapp import broker_transport
from tests.conftest import ROOT, requires_redis

_PROBE = """
import json, django
django.setup()
from django.conf import settings
from studyapp.celery import app
out = {"transport": getattr(settings, "CELERY_BROKER_TRANSPORT", None),
       "use_ssl": str(getattr(settings, "CELERY_BROKER_USE_SSL", None))}
if __import__("sys").argv[1] == "round-trip":
    with app.connection_for_write() as connection:
        queue = connection.SimpleQueue("broker-transport-probe")
        queue.put({"probe": 1})
        message = queue.get(timeout=10)
        message.ack()
        out.update(body=message.payload, channel=type(queue.channel).__module__ + "." + type(queue.channel).__name__)
        queue.clear()
        queue.close()
print(json.dumps(out))
"""


def _probe(broker_url: str, mode: str = "settings") -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "studyapp.settings", "CELERY_BROKER_URL": broker_url}
    result = subprocess.run([sys.executable, "-c", _PROBE, mode], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://127.0.0.1:6380/0",
                                 "REDISS://cache.internal:6380/1?ssl_cert_reqs=required"])
def test_every_redis_scheme_selects_the_surviving_transport(url):
    assert broker_transport.surviving_transport(url) == "studyapp.redis_transport:Transport"


def test_other_brokers_keep_the_transport_of_their_scheme_and_plain_redis_gets_no_tls():
    assert broker_transport.surviving_transport("amqp://guest@rabbit//") is None
    assert broker_transport.broker_tls("redis://127.0.0.1:6379/0") is None


def test_settings_give_a_tls_broker_the_surviving_transport_and_a_checked_certificate():
    assert broker_transport.broker_tls("rediss://127.0.0.1:6380/0") == {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    state = _probe("rediss://127.0.0.1:6380/0")
    assert state["transport"] == "studyapp.redis_transport:Transport" and "CERT_REQUIRED" in state["use_ssl"]


class _TlsProxy:
    """Redis behind TLS: accepts TLS connections on a free loopback port and relays them to the plain server."""

    def __init__(self, target: tuple[str, int], cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            try:
                client = self.context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()  # a client that did not speak TLS
                continue
            self.handshakes += 1
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def tls_redis(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    plain = urlsplit(os.environ["REDIS_URL"])
    proxy = _TlsProxy((plain.hostname or "127.0.0.1", plain.port or 6379), cert, key)
    yield proxy, plain.path.lstrip("/") or "0", cert
    proxy.close()


@requires_redis
def test_a_rediss_broker_round_trips_a_message_over_tls_through_the_surviving_transport(tls_redis):
    proxy, db, cert = tls_redis
    state = _probe(f"rediss://127.0.0.1:{proxy.port}/{db}?ssl_cert_reqs=required&ssl_ca_certs={cert}", "round-trip")
    assert state["transport"] == "studyapp.redis_transport:Transport"
    assert state["channel"] == "studyapp.redis_transport.Channel"
    assert state["body"] == {"probe": 1}
    assert proxy.handshakes >= 1  # the proxy speaks only TLS: the message went over it

"""Parts of the grading chaos test: a broker the test owns and may kill, scripted providers, worker settings.

No pytest import: these are plain helpers the test module composes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.grading.responders import domain_responder, purpose_of
from tests.llm_server import DelayedReply, ErrorReply, prompt_of


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the openssl command (the broker's TLS tests)."""
    cert, key = folder / "redis-server.pem", folder / "redis-server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


class OwnRedis:
    """A private `redis-server` on a free port that a test may stop and start (no persistence: a restart
    loses every queued message, as a crashed broker without AOF would).

    With `tls` (a certificate and its key) the server speaks only TLS on that port (redis-server's own TLS, no
    plain port), and `url` is the ``rediss://`` URL that checks its certificate against that one.
    """

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.tls = tls

    @property
    def url(self) -> str:
        if self.tls:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_cert_reqs=required&ssl_ca_certs={self.tls[0]}"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> OwnRedis:
        port = ["--port", str(self.port)]
        if self.tls:
            port = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(self.tls[0]),
                    "--tls-key-file", str(self.tls[1]), "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(
            ["redis-server", *port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not port_open(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        return self

    def freeze(self) -> None:
        """SIGSTOP the server: it still accepts connections (the kernel completes them) but answers nothing."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None


class ProviderScript:
    """Default responder for the fake server: domain JSON, optional slow judges, optional failing provider.

    Counts the judge replies it actually produced (the paid ones) and the judge requests it received.
    """

    def __init__(self) -> None:
        self.judge_delay = 0.0
        self.failing: set[str] = set()
        self._lock = threading.Lock()
        self.judge_requests: Counter[str] = Counter()
        self.judge_replies: Counter[str] = Counter()
        # ToM / response-quality codings: requests and produced (paid) replies per (purpose, provider).
        self.process_delay = 0.0
        self.process_requests: Counter[tuple[str, str]] = Counter()
        self.process_replies: Counter[tuple[str, str]] = Counter()

    @staticmethod
    def provider(body: dict[str, Any]) -> str:
        return "anthropic" if str(body.get("model", "")).startswith("claude") else "openai"

    @staticmethod
    def is_judge(body: dict[str, Any]) -> bool:
        return "<<<RUBRIC" in prompt_of(body)[1]

    def __call__(self, body: dict[str, Any]) -> Any:
        if not self.is_judge(body):
            purpose = purpose_of(body)
            if purpose in ("tom", "response_quality"):
                return self._process(purpose, body)
            return domain_responder(body)
        provider = self.provider(body)
        with self._lock:
            self.judge_requests[provider] += 1
        if provider in self.failing:
            return ErrorReply(500, "injected persistent failure")
        if self.judge_delay:
            return DelayedReply(self.judge_delay, then=lambda b: self._paid(provider, b))
        return self._paid(provider, body)

    def probe(self, provider: str) -> bool:
        """True while `provider` is down: its model list (the outage probe) fails too."""
        return provider in self.failing

    def _paid(self, provider: str, body: dict[str, Any]) -> str:
        with self._lock:
            self.judge_replies[provider] += 1
        return domain_responder(body)

    def _process(self, purpose: str, body: dict[str, Any]) -> Any:
        key = (purpose, self.provider(body))
        with self._lock:
            self.process_requests[key] += 1
        if self.process_delay:
            return DelayedReply(self.process_delay, then=lambda b: self._process_paid(key, b))
        return self._process_paid(key, body)

    def _process_paid(self, key: tuple[str, str], body: dict[str, Any]) -> str:
        with self._lock:
            self.process_replies[key] += 1
        return domain_responder(body)

    def process_in_flight(self) -> Counter[tuple[str, str]]:
        """Process-coding requests received but not yet answered, per (purpose, provider)."""
        with self._lock:
            return self.process_requests - self.process_replies

    def in_flight(self) -> int:
        """Judge requests received but not yet answered (a delayed reply still sleeping)."""
        with self._lock:
            failed = sum(self.judge_requests[p] for p in self.failing)
            return sum(self.judge_requests.values()) - failed - sum(self.judge_replies.values())

    def paid(self) -> int:
        with self._lock:
            return sum(self.judge_replies.values())


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (a prefork worker's pool processes)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


# `bench/grading_recovery.py` sets this to run the scenarios with the production defaults (60 s lease and sweep,
# the real retry counts and delays) instead of the test's shortened ones.
PRODUCTION_TIMING = os.environ.get("GRADING_CHAOS_TIMING") == "production"


def worker_chaos_env(broker_url: str, openai_base: str, anthropic_base: str, **extra: str) -> dict[str, str]:
    """Environment for a chaos worker: our broker, the fake providers, short leases and a fast sweep (or, under
    PRODUCTION_TIMING, every grading knob at its default)."""
    fast = {} if PRODUCTION_TIMING else {
        "GRADING_RETRY_BASE_DELAY": "0.01", "GRADING_MAX_RETRIES": "1", "GRADING_TASK_RETRIES": "2",
        "GRADING_TASK_RETRY_DELAY": "1", "GRADING_LEASE_SECONDS": "4", "GRADING_SWEEP_SECONDS": "2",
        "GRADING_REQUEUE_AFTER_SECONDS": "3", "GRADING_FOLLOW_UP_GRACE_SECONDS": "2",
        "RATING_REFRESH_DEBOUNCE_SECONDS": "0.5",
    }
    return {
        "CELERY_BROKER_URL": broker_url,
        "OPENAI_API_KEY": "test-openai-key", "OPENAI_BASE_URL": openai_base,
        "ANTHROPIC_API_KEY": "test-anthropic-key", "ANTHROPIC_BASE_URL": anthropic_base,
        "GRADING_ANTHROPIC_MODEL": "claude-sonnet-4-6",
        **fast,
        **extra,
    }

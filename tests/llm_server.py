"""A real local HTTP server that speaks the OpenAI Chat Completions and Anthropic Messages wire formats.

Tests point the official SDKs at it (base_url) so the real request building, retries, error mapping and JSON
handling run end to end without a network. Replies are scripted per provider with `enqueue`; when a queue is
empty the `default_responder` answers. Every request is recorded for assertions. No pytest import: the same
class runs standalone (`python tests/llm_server.py --port 8765 --latency 0.3`) for benches and manual runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Provider = Literal["openai", "anthropic"]
Responder = Callable[[dict[str, Any]], str]

PROVIDER_PATHS: dict[str, Provider] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@dataclass
class TextReply:
    """A successful reply; token counts default to a 4-characters-per-token estimate."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    stop_reason: str | None = None  # None means a normal end ("stop" / "end_turn")


@dataclass
class ErrorReply:
    """An error in the provider's own JSON shape, e.g. ErrorReply(429, retry_after=2)."""

    status: int
    message: str = ""
    retry_after: float | None = None


@dataclass
class DelayedReply:
    """Wait `seconds` before sending `then` (long enough to trip a client timeout if wanted)."""

    seconds: float
    then: ReplySpec = "ok"


ReplySpec = str | int | TextReply | ErrorReply | DelayedReply | Callable[[dict[str, Any]], Any]


@dataclass
class RecordedRequest:
    provider: Provider | None
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float = field(default_factory=time.time)


def echo_responder(body: dict[str, Any]) -> str:
    """Default reply: a small JSON object, valid for JSON-mode callers that accept any object."""
    system, user = prompt_of(body)
    return json.dumps({"ok": True, "model": body.get("model"), "prompt_chars": len(system) + len(user)})


def prompt_of(body: dict[str, Any]) -> tuple[str, str]:
    """Return (system, user text) from either wire format, so domain responders need not care which."""
    system_parts = [_text_of(body.get("system", ""))]
    user_parts = []
    for message in body.get("messages", []):
        text = _text_of(message.get("content", ""))
        if message.get("role") in ("system", "developer"):
            system_parts.append(text)
        elif message.get("role") == "user":
            user_parts.append(text)
    return "\n".join(p for p in system_parts if p), "\n".join(user_parts)


def image_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Return every image content block (OpenAI image_url parts or Anthropic image blocks) in the request."""
    blocks = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            blocks += [b for b in content if isinstance(b, dict) and b.get("type") in ("image_url", "image")]
    return blocks


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


_ERROR_TYPES = {
    "openai": {
        400: "invalid_request_error",
        401: "invalid_api_key",
        404: "not_found_error",
        429: "rate_limit_exceeded",
        500: "server_error",
        503: "service_unavailable",
    },
    "anthropic": {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        500: "api_error",
        503: "api_error",
        529: "overloaded_error",
    },
}


class FakeLLMServer:
    """Threaded fake of both providers' HTTP APIs; safe to script and inspect from any thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        latency: float = 0.0,
        default_responder: Responder = echo_responder,
    ) -> None:
        self.latency = latency
        self.default_responder = default_responder
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queues: dict[str, deque[ReplySpec]] = {"openai": deque(), "anthropic": deque()}
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self.max_in_flight = 0
        # Providers whose model list (GET /v1/models, the outage probe) answers 503, as during an outage.
        self.models_down: set[str] = set()
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- lifecycle
    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # ---- scripting and inspection
    def enqueue(self, provider: Provider, *responses: ReplySpec) -> None:
        """Queue replies for the next requests to `provider`, in order."""
        with self._lock:
            self._queues[provider].extend(responses)

    def reset(self) -> None:
        """Forget queued replies, recorded requests and statistics (between tests)."""
        with self._lock:
            for queue in self._queues.values():
                queue.clear()
            self._requests.clear()
            self.max_in_flight = 0
            self.latency = 0.0
            self.default_responder = echo_responder
            self.models_down = set()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, provider: Provider) -> list[RecordedRequest]:
        return [r for r in self.requests if r.provider == provider]

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until no request is being handled (e.g. a delayed reply whose client already gave up)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout)

    def pending(self, provider: Provider) -> int:
        with self._lock:
            return len(self._queues[provider])

    # ---- used by the handler
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next(self, provider: Provider) -> ReplySpec:
        with self._lock:
            queue = self._queues[provider]
            return queue.popleft() if queue else self.default_responder

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._idle:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            return

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            server._enter()
            self._counted = True
            try:
                self._handle_post()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test); nothing to answer
            finally:
                self._done()

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            """The model list (both SDKs' `models.list()`): free, so the outage probe uses it."""
            self._counted = False
            path = self.path.split("?", 1)[0]
            provider: Provider = "anthropic" if self.headers.get("anthropic-version") else "openai"
            server._record(RecordedRequest(provider, path, {k.lower(): v for k, v in self.headers.items()}, None))
            if path != "/v1/models":
                self._error(provider, ErrorReply(404, f"no route for {path}"))
                return
            probe = getattr(server.default_responder, "probe", None)  # a scripted outage (tests.grading.chaos)
            if provider in server.models_down or (probe is not None and probe(provider)):
                self._error(provider, ErrorReply(503, f"fake {provider} outage"))
                return
            item = ({"id": "gpt-4.1", "object": "model", "created": 0, "owned_by": "fake"} if provider == "openai"
                    else {"id": "claude-sonnet-4-6", "type": "model", "display_name": "fake",
                          "created_at": "2026-01-01T00:00:00Z"})
            payload: dict[str, Any] = ({"object": "list", "data": [item]} if provider == "openai" else
                                       {"data": [item], "has_more": False, "first_id": item["id"],
                                        "last_id": item["id"]})
            self._send(provider, 200, payload)

        def _done(self) -> None:
            # Leave before the reply is written: once the client has it, it may start its next request.
            if self._counted:
                self._counted = False
                server._leave()

        def _handle_post(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            provider = PROVIDER_PATHS.get(path)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            server._record(
                RecordedRequest(provider, path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if provider is None:
                self._error("openai", ErrorReply(404, f"no route for {path}"))
                return
            if not isinstance(body, dict):
                self._error(provider, ErrorReply(400, "request body is not valid JSON"))
                return
            if not (self.headers.get("authorization") or self.headers.get("x-api-key")):
                self._error(provider, ErrorReply(401, "missing API key"))
                return
            self._reply(provider, body, server._next(provider), first=True)

        def _reply(self, provider: Provider, body: dict[str, Any], spec: ReplySpec, *, first: bool) -> None:
            if isinstance(spec, DelayedReply):
                time.sleep(spec.seconds)
                self._reply(provider, body, spec.then, first=False)
                return
            if isinstance(spec, int):
                spec = ErrorReply(spec)
            if isinstance(spec, ErrorReply):
                self._error(provider, spec)
                return
            if callable(spec) and not isinstance(spec, TextReply):
                spec = spec(body)
                if not isinstance(spec, str | TextReply):
                    self._reply(provider, body, spec, first=first)
                    return
            reply = spec if isinstance(spec, TextReply) else TextReply(str(spec))
            if first and server.latency:
                time.sleep(server.latency)
            self._success(provider, body, reply)

        def _success(self, provider: Provider, body: dict[str, Any], reply: TextReply) -> None:
            system, user = prompt_of(body)
            tokens_in = reply.input_tokens if reply.input_tokens is not None else _tokens(system + user)
            tokens_out = reply.output_tokens if reply.output_tokens is not None else _tokens(reply.text)
            model = body.get("model", "fake-model")
            if provider == "openai":
                payload: dict[str, Any] = {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.text},
                            "finish_reason": reply.stop_reason or "stop",
                            "logprobs": None,
                        }
                    ],
                    "usage": {
                        "prompt_tokens": tokens_in,
                        "completion_tokens": tokens_out,
                        "total_tokens": tokens_in + tokens_out,
                    },
                }
            else:
                payload = {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": reply.text}],
                    "stop_reason": reply.stop_reason or "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                }
            self._send(provider, 200, payload)

        def _error(self, provider: Provider, error: ErrorReply) -> None:
            kind = _ERROR_TYPES[provider].get(error.status, "api_error")
            message = error.message or f"fake {provider} error {error.status}"
            if provider == "openai":
                payload: dict[str, Any] = {
                    "error": {"message": message, "type": kind, "param": None, "code": kind}
                }
            else:
                payload = {
                    "type": "error",
                    "error": {"type": kind, "message": message},
                    "request_id": f"req_{uuid.uuid4().hex[:16]}",
                }
            headers = {}
            if error.retry_after is not None:
                headers["retry-after"] = f"{error.retry_after:g}"
            self._send(provider, error.status, payload, headers)

        def _send(
            self,
            provider: Provider,
            status: int,
            payload: dict[str, Any],
            headers: dict[str, str] | None = None,
        ) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header(
                "x-request-id" if provider == "openai" else "request-id", f"req_{uuid.uuid4().hex[:16]}"
            )
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self._done()
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _load_responder(dotted: str) -> Responder:
    import os
    import sys

    if os.getcwd() not in sys.path:  # `python tests/llm_server.py` puts only tests/ on the path
        sys.path.insert(0, os.getcwd())
    module, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(module), attr)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the fake OpenAI/Anthropic server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every successful reply")
    parser.add_argument("--responder", help="module:function answering every request (default: echo JSON)")
    parser.add_argument(
        "--judge-bias", action="append", default=[], metavar="MODEL_PREFIX:MARKER:POINTS",
        help="grade like a judge that adds POINTS to deliverables containing MARKER when its model name starts "
             "with MODEL_PREFIX (repeatable; uses the study platform's judge prompt, tests/grading/responders.py)",
    )
    args = parser.parse_args()
    responder = _load_responder(args.responder) if args.responder else echo_responder
    if args.judge_bias:
        _load_responder("tests.grading.responders:domain_responder")  # puts the project on the import path
        from tests.grading.responders import JudgeBias, graded_responder

        responder = graded_responder(biases=[JudgeBias.parse(text) for text in args.judge_bias])
    server = FakeLLMServer(args.host, args.port, latency=args.latency, default_responder=responder)
    print(
        f"fake LLM server on {server.url} (OpenAI base {server.openai_base_url}, "
        f"Anthropic base {server.anthropic_base_url}); Ctrl-C to stop",
        flush=True,
    )
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()

"""What an error report may carry to the reporting service (SENTRY_DSN): code locations, never personal data.

``send_default_pii=False`` alone still lets the SDK send the request body, every header (the CSRF token among
them), local variables of each frame (a client IP, a participant's e-mail) and the machine's host name. So the
SDK is set up to collect less (`init_options`) and every event passes `scrub_event` before it leaves, which
keeps a closed set of fields and rewrites what remains:

- the request keeps only its method (the URL pattern is the event's transaction, e.g. ``/p/{token}/``); no
  URL, query string, body, cookie, header or environment;
- no user, server name, request-derived tags or extra data (a Celery task's arguments);
- stack frames keep file, function, line and source lines, never their local variables;
- every remaining text (exception messages, log lines, breadcrumbs, span descriptions) has e-mail addresses,
  IP addresses and host:port pairs replaced (``[email]``, ``[address]``).
"""

from __future__ import annotations

import re
from typing import Any

# Top-level event fields that say where the code failed and in which release, never who was involved.
_KEPT_FIELDS = frozenset({
    "event_id", "timestamp", "start_timestamp", "level", "platform", "logger", "transaction", "transaction_info",
    "environment", "release", "dist", "sdk", "exception", "threads", "logentry", "message", "breadcrumbs",
    "contexts", "fingerprint", "type", "spans", "measurements", "modules",
})
_KEPT_CONTEXTS = frozenset({"trace", "runtime", "os"})  # not "browser"/"device" (the client's), nor "celery"
_FRAME_FIELDS = frozenset({"filename", "abs_path", "module", "function", "lineno", "colno", "in_app",
                           "context_line", "pre_context", "post_context", "platform"})
_SPAN_FIELDS = frozenset({"trace_id", "span_id", "parent_span_id", "same_process_as_parent", "op", "description",
                          "start_timestamp", "timestamp", "status", "origin"})
# Machine-written values whose digits and colons are times or ids, never an address.
_UNSCRUBBED_KEYS = frozenset({"event_id", "timestamp", "start_timestamp", "trace_id", "span_id", "parent_span_id"})
_TAG_FIELDS = frozenset({"celery_task_id", "celery_task_name", "level", "logger", "transaction", "status_code"})

EMAIL = re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]+@[\w-]+(?:\.[\w-]+)+")
# IPv4 with an optional port, bracketed or bare IPv6, and name:port (an internal service address).
ADDRESS = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"
                     r"|\[[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*\](?::\d+)?"
                     r"|(?<![\w:])[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])"
                     r"|\b[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?:\d{2,5}\b")


def init_options() -> dict[str, Any]:
    """sentry_sdk.init options that keep personal data from being collected at all (scrub_event is the net)."""
    return {"send_default_pii": False, "include_local_variables": False, "max_request_body_size": "never",
            "server_name": "", "before_send": scrub_event, "before_send_transaction": scrub_event,
            "before_breadcrumb": scrub_breadcrumb}


def scrub_text(text: str) -> str:
    return ADDRESS.sub("[address]", EMAIL.sub("[email]", text))


def _scrub_strings(value: Any) -> Any:
    """Rewrite every string in a JSON-like value, without recursion (no payload depth can raise)."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = scrub_text(item)
        elif isinstance(item, dict):
            stack.extend((item, k) for k in item if k not in _UNSCRUBBED_KEYS)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, tuple):
            container[key] = list(item)
            stack.extend((container[key], i) for i in range(len(item)))
    return root[0]


def _frames(event: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for section in ("exception", "threads"):
        for entry in (event.get(section) or {}).get("values") or []:
            found.extend((entry.get("stacktrace") or {}).get("frames") or [])
    return found


def scrub_breadcrumb(crumb: dict[str, Any], hint: Any = None) -> dict[str, Any]:
    """A breadcrumb keeps its kind, level, time and scrubbed message; its data (SQL parameters, URLs) goes."""
    kept = {key: crumb[key] for key in ("type", "category", "level", "timestamp", "message") if key in crumb}
    return _scrub_strings(kept)


def scrub_event(event: dict[str, Any], hint: Any = None) -> dict[str, Any]:
    """Keep the fields that locate a failure, drop everything about the request, the user and the machine."""
    method = (event.get("request") or {}).get("method")
    kept: dict[str, Any] = {key: value for key, value in event.items() if key in _KEPT_FIELDS}
    if method:
        kept["request"] = {"method": str(method)[:16]}
    kept["contexts"] = {key: value for key, value in (event.get("contexts") or {}).items() if key in _KEPT_CONTEXTS}
    kept["tags"] = {key: value for key, value in (event.get("tags") or {}).items() if key in _TAG_FIELDS}
    for frame in _frames(kept):
        for key in [key for key in frame if key not in _FRAME_FIELDS]:
            del frame[key]  # "vars" above all: a frame's local variables
    for span in kept.get("spans") or []:
        for key in [key for key in span if key not in _SPAN_FIELDS]:
            del span[key]  # "data": query parameters, URLs, addresses
    crumbs = kept.get("breadcrumbs")
    if isinstance(crumbs, dict) and isinstance(crumbs.get("values"), list):
        crumbs["values"] = [scrub_breadcrumb(crumb) for crumb in crumbs["values"]]
    return _scrub_strings(kept)

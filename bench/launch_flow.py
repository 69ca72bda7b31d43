"""One participant's launch journey as HTTP requests, shared by the load bench and the per-view profile.

The journey is what a recruit does in the first minutes of a study launch: open the personal invitation, create
the account, consent, find the occupation, answer the pre-survey (autosaved a few answers at a time, as the page
does), then task 1 (open, download a reference file, set up, upload a deliverable and a log, review, submit) and
open task 2. Every request is named by its step, so figures are per step. No Django here: the load generator runs
this against a real server; `bench/worker_flow.py` runs it through Django's test client.

Uploaded bytes are derived from the platform id and the file name (`payload`), so the integrity check can prove
every stored file byte-identical without the client keeping a log.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

DELIVERABLE_BYTES = 1 << 20
LOG_BYTES = 200 * 1024
PASSWORD = "launch-Bench-pass-42"


class Http(Protocol):
    """What the journey needs from a client: a named request without redirect following, and the CSRF cookie."""

    def request(self, step: str, method: str, path: str, *, data: dict | None = None,
                files: dict | None = None, headers: dict | None = None) -> Any: ...

    def csrf(self) -> str: ...


@dataclass(frozen=True)
class Recruit:
    join_path: str
    worker_id: str
    study_slug: str


def payload(worker_id: str, name: str, size: int) -> bytes:
    """Deterministic text content for one recruit's file (hex of a SHAKE-256 stream of the id and the name):
    text passes the content-type sniffing of every allowed text format."""
    return hashlib.shake_256(f"{worker_id}/{name}".encode()).hexdigest((size + 1) // 2).encode()[:size]


class FlowError(RuntimeError):
    """The server answered a step with something the journey cannot continue from."""


def _expect(response: Any, step: str, *codes: int) -> Any:
    if response.status_code not in codes:
        raise FlowError(f"{step}: HTTP {response.status_code}")
    return response


def _text(response: Any) -> str:
    content = getattr(response, "text", None)
    return content if isinstance(content, str) else response.content.decode()


def launch_journey(http: Http, recruit: Recruit, survey: dict[str, Any], *, password: str = "",
                   pause: Callable[[float], None] = lambda seconds: None) -> None:
    """Walk one recruit from the invitation to task 2 opened; raise FlowError on an unexpected answer.

    ``survey`` is ``{"answers": {code: raw value}, "occupation_query": str, "occupation_id": int}``;
    ``pause`` is called between steps with a think time in seconds (the load bench sleeps, the profile does not).
    """
    base = f"/study/{recruit.study_slug}"
    csrf = lambda: {"X-CSRFToken": http.csrf()}  # noqa: E731 - the token is read after each cookie refresh

    _expect(http.request("join", "GET", recruit.join_path), "join", 200)
    pause(5)
    form = {"username": recruit.worker_id.lower(), "email": "", "password1": password, "password2": password}
    _expect(http.request("signup", "POST", recruit.join_path, data=form, headers=csrf()), "signup", 302)

    consent_page = _text(_expect(http.request("consent", "GET", f"{base}/consent/"), "consent", 200))
    version = re.search(r'name="version" value="(\d+)"', consent_page)
    pause(10)
    _expect(http.request("consent-submit", "POST", f"{base}/consent/",
                         data={"decision": "accept", "version": version.group(1) if version else "1"},
                         headers=csrf()), "consent-submit", 302)

    _expect(http.request("profile", "GET", f"{base}/profile/"), "profile", 200)
    query = survey["occupation_query"]
    for length in (3, len(query)):  # the picker searches as the worker types
        pause(1)
        _expect(http.request("occupation-search", "GET", "/occupations/search/",
                             data={"q": query[:length], "study": recruit.study_slug}), "occupation-search", 200)
    pause(3)
    _expect(http.request("profile-submit", "POST", f"{base}/profile/",
                         data={"occupation": survey["occupation_id"], "years_experience": 7}, headers=csrf()),
            "profile-submit", 302)

    page = _text(_expect(http.request("pre-survey", "GET", f"{base}/survey/pre/"), "pre-survey", 200))
    window = re.search(r'data-autosave-ms="(\d+)"', page)
    _answer_survey(http, base, survey["answers"], csrf, pause, window=int(window.group(1)) / 1000 if window else 0.0)
    fields = {f"q_{code}": value for code, value in survey["answers"].items()}
    _expect(http.request("pre-survey-submit", "POST", f"{base}/survey/pre/", data={**fields, "action": "submit"},
                         headers=csrf()), "pre-survey-submit", 302)

    work_task(http, recruit, open_task(http, base, 1, csrf, pause), 1, csrf, pause)
    pause(3)
    open_task(http, base, 2, csrf, pause)


def _answer_survey(http: Http, base: str, answers: dict[str, str], csrf, pause, *, window: float) -> None:
    """Answer one question every 2 s as the page's script autosaves them: the answers given within ``window``
    seconds of the first unsaved one go in one request (``data-autosave-ms``; 0 sends each at once). What is
    still unsaved when the form is submitted travels with the form, as on the page."""
    clock, first, batch = 0.0, 0.0, {}
    for code, value in answers.items():
        pause(2)
        clock += 2
        if not batch:
            first = clock
        batch[code] = value
        if clock - first >= window:
            _expect(http.request("pre-survey-autosave", "POST", f"{base}/survey/pre/autosave/",
                                 data={"code": list(batch), "value": list(batch.values())}, headers=csrf()),
                    "pre-survey-autosave", 200)
            batch = {}


def open_task(http: Http, base: str, position: int, csrf, pause) -> str:
    """Open task ``position`` from its start page (the match is made on the POST); return the task page."""
    _expect(http.request("task-start-page", "GET", f"{base}/tasks/{position}/"), "task-start-page", 200)
    pause(5)
    _expect(http.request("task-assign", "POST", f"{base}/tasks/{position}/start/", headers=csrf()),
            "task-assign", 302)
    return _text(_expect(http.request("task", "GET", f"{base}/tasks/{position}/"), "task", 200))


def work_task(http: Http, recruit: Recruit, page: str, position: int, csrf, pause, *,
              deliverable_bytes: int = DELIVERABLE_BYTES, log_bytes: int = LOG_BYTES) -> None:
    """From an open task's page: download the reference, set up, upload a deliverable and a log (or give the
    shared-session link, for agents whose log is one), review and submit; a solo-condition task has no setup
    and no log, and sends its solo panel instead."""
    episode = re.search(r"/episodes/(\d+)/(setup|solo)/", page)
    if episode is None:
        raise FlowError(f"task {position}: neither a setup form nor a solo task on the task page")
    episode_path = f"/episodes/{episode.group(1)}"
    solo = episode.group(2) == "solo"  # a solo-condition task: no agent to set up and no log to send
    reference = re.search(rf"{episode_path}/reference/(\d+)/", page)
    if reference is not None:
        _expect(http.request("reference-download", "GET", f"{episode_path}/reference/{reference.group(1)}/"),
                "reference-download", 200)
    pause(10)
    if not solo:
        _expect(http.request("setup", "POST", f"{episode_path}/setup/",
                             data={"prior_experience": "few", "ready": "on"}, headers=csrf()), "setup", 302)
    pause(30)
    uploads = (("deliverable", f"report-{position}.csv", deliverable_bytes),
               *(() if solo else (("log", f"session-log-{position}.txt", log_bytes),)))
    for kind, name, size in uploads:
        files = {"file": (name, payload(recruit.worker_id, name, size), "application/octet-stream")}
        _expect(http.request("upload", "POST", f"{episode_path}/files/", data={"kind": kind}, files=files,
                             headers={**csrf(), "Accept": "application/json"}), "upload", 200, 201)
    pause(5)
    if solo:  # "Review and submit" sends the solo panel (no AI tool used, no notes) and opens the review
        _expect(http.request("solo", "POST", f"{episode_path}/solo/", data={"notes": "", "next": "review"},
                             headers=csrf()), "solo", 302)
    review = _text(_expect(http.request("review", "GET", f"{episode_path}/submit/"), "review", 200))
    if "shared-session link" in review:  # agents whose log is a share link, not a file
        _expect(http.request("log", "POST", f"{episode_path}/log/",
                             data={"share_url": f"https://manus.im/share/{recruit.worker_id}", "notes": "ok"},
                             headers={**csrf(), "Accept": "application/json"}), "log", 200)
    pause(5)
    submitted = _expect(http.request("submit", "POST", f"{episode_path}/submit/", headers=csrf()), "submit", 302)
    if "#" in submitted.headers.get("Location", ""):  # sent back to a section of the task page: refused
        raise FlowError(f"submit of task {position}: refused ({submitted.headers['Location']})")


def keep_working(http: Http, recruit: Recruit, *, last_position: int, pause,
                 deliverable_bytes: int, log_bytes: int, until: Callable[[], bool] = lambda: False) -> None:
    """Steady state after the launch journey (task 2 left open): finish task 2, then open and finish each
    next task up to ``last_position`` (the study's session), until ``until()`` says stop."""
    base = f"/study/{recruit.study_slug}"
    csrf = lambda: {"X-CSRFToken": http.csrf()}  # noqa: E731
    for position in range(2, last_position + 1):
        if until():
            return
        page = (_text(_expect(http.request("task", "GET", f"{base}/tasks/2/"), "task", 200)) if position == 2
                else open_task(http, base, position, csrf, pause))
        work_task(http, recruit, page, position, csrf, pause, deliverable_bytes=deliverable_bytes,
                  log_bytes=log_bytes)

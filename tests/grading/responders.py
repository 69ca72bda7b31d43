"""Domain replies for the fake LLM server: valid rubric, judge and log-coding JSON built from our own prompts.

Used by tests/grading/conftest.py and bench/grading_throughput.py (`--responder` form:
`tests.grading.responders:domain_responder`). Judge replies read the criteria JSON block of the judge
prompt, so they always name the real keys and stay within each criterion's points.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from grading.schemas import FLUENCY_CODES, RUBRIC_CATEGORIES
from tests.llm_server import prompt_of

Body = dict[str, Any]


def rubric_dict(*, per_category: int = 2, **overrides: Any) -> dict[str, Any]:
    """A rubric that passes every check: four categories, points adding up to 100."""
    categories = []
    for _code, name, points in RUBRIC_CATEGORIES:
        share = points / per_category
        categories.append({
            "name": name, "max_points": points,
            "criteria": [{"description": f"{name} check {i + 1}", "points": share,
                          "expected_value": f"value {i + 1}", "evaluation_method": "Open the file and compare.",
                          "label": "critical" if i == 0 else "important"} for i in range(per_category)],
        })
    rubric = {"total_points": 100, "categories": categories,
              "expected_specific_values": [{"item": "Grand total", "value": "1,234,567"}],
              "critical_requirements": ["The deliverable is an Excel workbook."],
              "evaluation_notes": "Check every figure against the reference workbook.",
              "reference_files_analyzed": ["data.csv"]}
    rubric.update(overrides)
    return rubric


def rubric_reply(**overrides: Any) -> Callable[[Body], str]:
    return lambda body: json.dumps(rubric_dict(**overrides))


def criteria_of(body: Body) -> list[dict[str, Any]]:
    """The criteria JSON block our judge prompt carries."""
    _system, user = prompt_of(body)
    start = user.index("<<<RUBRIC\n") + len("<<<RUBRIC\n")
    end = user.index("\nRUBRIC>>>", start)
    return json.loads(user[start:end])


def judge_dict(criteria: Iterable[dict[str, Any]], fraction: float = 0.8,
               earned: dict[str, float] | None = None) -> dict[str, Any]:
    earned = earned or {}
    return {"criteria": [{"key": c["key"], "earned": earned.get(c["key"], round(c["points"] * fraction, 4)),
                          "reason": f"Found {c['key']} mostly as expected."} for c in criteria],
            "summary": "Solid work with minor gaps.",
            # Deliberately wrong sums: our pipeline must ignore them and recompute.
            "total": 999, "category_scores": {"Correctness & Accuracy": {"earned": 999}}}


def judge_reply(fraction: float = 0.8, *, earned: dict[str, float] | None = None,
                drop: Iterable[str] = (), extra: Iterable[dict[str, Any]] = ()) -> Callable[[Body], str]:
    """A judge verdict scoring each criterion at `fraction` of its points (or `earned` per key)."""
    dropped = set(drop)

    def reply(body: Body) -> str:
        verdict = judge_dict([c for c in criteria_of(body) if c["key"] not in dropped], fraction, earned)
        verdict["criteria"] += list(extra)
        return json.dumps(verdict)

    return reply


_OBSERVED = ("iterates_and_refines", "clarifies_goal_before_asking", "checks_facts_and_claims")


def fluency_dict(observed: Iterable[str] = _OBSERVED) -> dict[str, Any]:
    seen = set(observed)
    return {code: {"observed": code in seen,
                   "reason": ("The worker did this in turn 2.\nSecond line." if code in seen
                              else "No evidence in the log.")} for code in FLUENCY_CODES}


def fluency_reply(observed: Iterable[str] = _OBSERVED) -> Callable[[Body], str]:
    return lambda body: json.dumps(fluency_dict(observed))


TOM_SCORE = re.compile(r"tom:\s*([0-5])")


def tom_dict(score: int = 3, markers: Sequence[str] = ("rapport", "challenges_ai")) -> dict[str, Any]:
    return {"reason": f"The worker shows {len(markers)} markers.\nSecond line.", "markers": list(markers),
            "score": score}


def tom_reply(body: Body) -> str:
    """A ToM coding whose score follows a ``tom: N`` line in the worker's prompts (3 without one)."""
    found = TOM_SCORE.search(prompt_of(body)[1])
    return json.dumps(tom_dict(int(found.group(1)) if found else 3))


def quality_dict(score: int = 4) -> dict[str, Any]:
    return {"reason": "The agent answered the request and checked the figures.", "score": score}


def purpose_of(body: Body) -> str:
    """Which of our prompts a request carries, from the JSON Schema title complete_json embeds."""
    system, _user = prompt_of(body)
    for title, purpose in (('"title": "RubricOut"', "rubric"), ('"title": "JudgeOut"', "judge"),
                           ('"title": "FluencyOut"', "fluency"), ('"title": "ToMOut"', "tom"),
                           ('"title": "ResponseQualityOut"', "response_quality")):
        if title in system:
            return purpose
    return "unknown"


@dataclass(frozen=True)
class JudgeBias:
    """A judge model (chosen by a prefix of its name) that gives ``points`` more to every deliverable carrying
    ``marker`` -- the way a judge may favour work produced with its own model family's agent."""

    model_prefix: str
    marker: str
    points: float

    @classmethod
    def parse(cls, text: str) -> JudgeBias:
        """Read ``MODEL_PREFIX:MARKER:POINTS`` (the standalone server's ``--judge-bias``)."""
        prefix, marker, points = text.rsplit(":", 2) if text.count(":") >= 2 else ("", "", "")
        if not prefix or not marker:
            raise ValueError(f"judge bias must look like MODEL_PREFIX:MARKER:POINTS, got {text!r}")
        return cls(prefix, marker, float(points))


QUALITY = re.compile(r"quality:\s*([01](?:\.\d+)?)")


def _unit(*parts: str) -> float:
    """A number in [-1, 1] fixed by the parts (a judge's own, repeatable noise)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**63 - 1.0


def graded_responder(*, biases: Sequence[JudgeBias] = (), noise_points: float = 1.0,
                     leniency: dict[str, float] | None = None, fallback: float = 0.7) -> Callable[[Body], str]:
    """Domain replies whose judge verdicts follow the deliverable, as real judges' would.

    A judge scores each criterion at the deliverable's quality (a ``quality: 0.63`` line in it; ``fallback``
    without one), plus its model's leniency (``leniency``: model prefix -> points), a small repeatable noise of
    its own (up to ``noise_points``) and every matching :class:`JudgeBias`; points are spread over the criteria
    in proportion to their weight and kept within each criterion's range. Other prompts get the domain replies.
    """
    lenient = leniency or {}

    def reply(body: Body) -> str:
        if purpose_of(body) != "judge":
            return domain_responder(body)
        model = str(body.get("model", ""))
        _system, user = prompt_of(body)
        found = QUALITY.search(user)
        total = 100.0 * (float(found.group(1)) if found else fallback)
        total += sum(points for prefix, points in lenient.items() if model.startswith(prefix))
        # The noise is the judge's own for this deliverable: fixed by the model and the quality line, so a run
        # grades alike whatever else (task titles, ids) the prompt happens to carry.
        total += noise_points * _unit(model, found.group(0) if found else user)
        total += sum(b.points for b in biases if model.startswith(b.model_prefix) and b.marker in user)
        criteria = criteria_of(body)
        weight = sum(c["points"] for c in criteria) or 1.0
        fraction = min(1.0, max(0.0, total / weight))
        return json.dumps(judge_dict(criteria, fraction))

    return reply


def domain_responder(body: Body) -> str:
    """Default reply for any of our prompts: a valid rubric, a 0.8 judge verdict, or a log coding."""
    purpose = purpose_of(body)
    if purpose == "rubric":
        return json.dumps(rubric_dict())
    if purpose == "judge":
        return judge_reply(0.8)(body)
    if purpose == "fluency":
        return json.dumps(fluency_dict())
    if purpose == "tom":
        return tom_reply(body)
    if purpose == "response_quality":
        return json.dumps(quality_dict())
    return json.dumps({"ok": True})

"""Gentle checks of rubric criteria against the UpBench authoring rules (UpBench §3.4, App. A.3).

Pure Python, no Django: the editor calls it through a small JSON endpoint while the expert types, and the
authoring service calls it on save. Two severities: ``error`` findings block submission for approval (too
few or too many criteria, a criterion without a label or text); ``warning`` findings are advice the expert
may overrule (a vague word can be fine in context).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

MIN_CRITERIA = 5
MAX_CRITERIA = 20
LABELS = ("critical", "important", "optional", "pitfall")
LONG_CRITERION_CHARS = 300

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class LintHint:
    """One finding; ``index`` is the 0-based criterion position, ``None`` for the rubric as a whole."""

    code: str
    severity: str
    message: str
    index: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _words(*phrases: str) -> re.Pattern[str]:
    body = "|".join(p.replace(" ", r"[\s-]+") for p in phrases)
    return re.compile(rf"\b({body})\b", re.IGNORECASE)


# Judgements of taste: two checkers would disagree on them (App. A.3 "avoid subjective terms").
_SUBJECTIVE = _words(
    "high quality", "good quality", "top quality", "professional", "professionally", "adequate", "adequately",
    "good", "great", "excellent", "nice", "nicely", "appropriate", "appropriately", "reasonable", "reasonably",
    "sufficient", "sufficiently", "satisfactory", "decent", "well written", "well designed", "polished",
    "engaging", "compelling", "impressive", "attractive", "beautiful", "elegant", "user friendly",
    "easy to read", "high standard", "best practices",
)
# Depth words with no yardstick ("thorough and insightful" is the paper's unmeasurable example).
_UNMEASURABLE = _words(
    "thorough", "thoroughly", "insightful", "comprehensive", "comprehensively", "in depth", "detailed",
    "meaningful", "robust", "creative", "innovative", "as needed", "where relevant",
    "etc",
)
_TIMELINE = re.compile(
    r"\b(deadline|due (date|by)|on time|asap|as soon as possible|turnaround|timeline|"
    r"by (the )?end of|by (monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|today|tonight)|"
    r"within \d+\s*(minutes?|hours?|days?|weeks?|months?|business days?)|"
    r"(delivered|completed|submitted|finished) (by|before|within)|"
    r"\d{4}-\d{2}-\d{2}|"
    r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}(st|nd|rd|th)?\b)",
    re.IGNORECASE,
)
_WORKER = re.compile(
    r"\b((the )?(worker|freelancer|contractor|candidate|writer|translator|developer|designer|consultant)"
    r"( must| should| is| has| have)? (be |is )?(based|located|native|certified|experienced|qualified|a native)|"
    r"native speaker|years? of experience|\d+\+? years|(u\.?s\.?|uk|eu|us)[\s-]based|located in|"
    r"certified|certification|degree in|background in|expertise in)\b",
    re.IGNORECASE,
)
_NEGATED_PITFALL = re.compile(r"^\s*(avoid|avoids|does not|doesn't|do not|don't|never|no|free of|without)\b",
                              re.IGNORECASE)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def lint_criterion(description: str, label: str = "", *, index: int | None = None) -> list[LintHint]:
    """Return advice for one criterion's wording (warnings only)."""
    text = (description or "").strip()
    hints: list[LintHint] = []
    if not text:
        return hints
    subjective = sorted({m.group(0).lower() for m in _SUBJECTIVE.finditer(text)})
    if subjective:
        words = ", ".join(f"“{w}”" for w in subjective)
        hints.append(LintHint("subjective", WARNING, f"{words} is a matter of opinion. Say what a checker would "
                              "see instead: a count, a named section, a value, a format.", index))
    unmeasurable = sorted({m.group(0).lower() for m in _UNMEASURABLE.finditer(text)})
    if unmeasurable:
        words = ", ".join(f"“{w}”" for w in unmeasurable)
        hints.append(LintHint("unmeasurable", WARNING, f"{words} has no yardstick. Name what must be present "
                              "(e.g. “covers all 12 months”, “lists 5 recommendations”).", index))
    if _TIMELINE.search(text):
        hints.append(LintHint("timeline", WARNING, "Deadlines and delivery dates cannot be checked from the "
                              "deliverable. Leave timing out of the rubric.", index))
    if _WORKER.search(text):
        hints.append(LintHint("worker", WARNING, "This seems to describe the person doing the work (location, "
                              "experience, credentials). Criteria judge the deliverable only.", index))
    if len(text) > LONG_CRITERION_CHARS:
        hints.append(LintHint("long", WARNING, f"{len(text)} characters: a criterion should read like one "
                              "bullet point that takes a minute or two to check. Consider splitting it.", index))
    elif len(text.split()) < 3:
        hints.append(LintHint("short", WARNING, "Too short to check on its own. Say what must be present "
                              "and where.", index))
    if label == "pitfall" and _NEGATED_PITFALL.search(text):
        hints.append(LintHint("pitfall_negated", WARNING, "Describe the mistake itself (e.g. “Totals contain "
                              "arithmetic errors”); the pitfall label already says it must be avoided, and "
                              "graders mark whether it was avoided.", index))
    return hints


def lint_rubric(criteria: Iterable[Mapping[str, Any]]) -> list[LintHint]:
    """Return every finding for a rubric given as ``[{"description": ..., "label": ...}, ...]``.

    Rows with neither text nor label are treated as unused editor rows and ignored, but keep their index
    so hints line up with what the expert sees.
    """
    hints: list[LintHint] = []
    used: list[tuple[int, str, str]] = []
    for index, row in enumerate(criteria):
        description = str(row.get("description") or "").strip()
        label = str(row.get("label") or "").strip()
        if not description and not label:
            continue
        used.append((index, description, label))
        if not description:
            hints.append(LintHint("missing_text", ERROR, "This criterion has a label but no text.", index))
        if not label:
            hints.append(LintHint("missing_label", ERROR, "Choose a label: critical, important, optional or "
                                  "pitfall.", index))
        elif label not in LABELS:
            hints.append(LintHint("bad_label", ERROR, f"“{label}” is not a label; choose critical, important, "
                                  "optional or pitfall.", index))
        hints.extend(lint_criterion(description, label, index=index))
    count = len(used)
    if count < MIN_CRITERIA:
        hints.append(LintHint("too_few", ERROR, f"{criteria_count(count)}: a rubric needs between {MIN_CRITERIA} "
                              f"and {MAX_CRITERIA}. Add {MIN_CRITERIA - count} more before submitting."))
    elif count > MAX_CRITERIA:
        hints.append(LintHint("too_many", ERROR, f"{criteria_count(count)}: a rubric needs between {MIN_CRITERIA} "
                              f"and {MAX_CRITERIA}. Merge or remove {count - MAX_CRITERIA}."))
    if used and not any(label == "critical" for _, _, label in used):
        hints.append(LintHint("no_critical", WARNING, "No criterion is labelled critical. Which checks must pass "
                              "for the work to be acceptable at all?"))
    seen: dict[str, int] = {}
    for index, description, _ in used:
        key = _norm(description)
        if key and key in seen:
            hints.append(LintHint("duplicate", WARNING, f"Same text as criterion {seen[key] + 1}.", index))
        elif key:
            seen[key] = index
    return hints


def criteria_count(n: int) -> str:
    """Return "1 criterion" or "n criteria"."""
    return f"{n} criterion" if n == 1 else f"{n} criteria"


def blocking(hints: Iterable[LintHint]) -> list[LintHint]:
    """Return the findings that block submission."""
    return [hint for hint in hints if hint.severity == ERROR]

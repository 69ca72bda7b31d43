"""Reads of surveys: what a participant sees while taking one, and answers shaped for :mod:`surveys.stats`.

For the statistics, answers are keyed by participant primary key so pre and post pair up; nothing here leaves
the server, and the statistics built from it carry no ids. Only submitted responses of participants who have
not withdrawn count: a half-filled autosaved survey is not an answer yet, and a withdrawn participant's data is
out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max

from studies.models import Participant, Study
from surveys.models import Answer, Instrument, Question, SurveyResponse

_EXCLUDED_STATUSES = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)


@dataclass(frozen=True)
class ItemInfo:
    """One question code as the statistics need it."""

    code: str
    order: int
    kind: str
    phases: str
    text: str
    construct: str = ""
    categories: tuple[str, ...] = ()


@dataclass
class StudyAnswers:
    """Coded answers per phase and item code: ``numeric[phase][code][participant_id]``."""

    numeric: dict[str, dict[str, dict[int, float | None]]] = field(default_factory=lambda: {"pre": {}, "post": {}})
    categorical: dict[str, dict[str, dict[int, str]]] = field(default_factory=lambda: {"pre": {}, "post": {}})
    items: dict[str, ItemInfo] = field(default_factory=dict)
    respondents: dict[str, set[int]] = field(default_factory=lambda: {"pre": set(), "post": set()})
    unrecognised: dict[str, int] = field(default_factory=dict)

    def ordered_codes(self, codes: Iterable[str]) -> list[str]:
        """Return codes in questionnaire order."""
        return sorted(set(codes), key=lambda code: (self.items[code].order if code in self.items else 10**6, code))


def _category_map(options: Any) -> tuple[tuple[str, ...], dict[str, str]]:
    """Return the display categories of a choice question and a map from stored value to category."""
    if isinstance(options, dict):
        options = options.get("choices", [])
    if not isinstance(options, list):
        return (), {}
    categories: list[str] = []
    mapping: dict[str, str] = {}
    for option in options:
        if isinstance(option, dict):
            label = str(option.get("label") or option.get("value") or "").strip()
            if not label:
                continue
            categories.append(label)
            for key in (option.get("value"), option.get("label"), option.get("code")):
                if key is not None and str(key).strip():
                    mapping[str(key).strip().casefold()] = label
        elif isinstance(option, str) and option.strip():
            categories.append(option.strip())
            mapping[option.strip().casefold()] = option.strip()
    return tuple(categories), mapping


def study_answers(study: Study) -> StudyAnswers:
    """Return every counted answer of the study, coded for the statistics (two queries)."""
    rows = list(
        Answer.objects.filter(response__participant__study=study, response__submitted_at__isnull=False)
        .exclude(response__participant__status__in=_EXCLUDED_STATUSES)
        .values_list("response__participant_id", "response__phase", "question_id", "numeric", "value")
    )
    question_ids = {row[2] for row in rows}
    questions = Question.objects.filter(pk__in=question_ids).values(
        "pk", "code", "order", "kind", "phases", "text", "construct", "options"
    )
    by_id: dict[int, tuple[ItemInfo, dict[str, str]]] = {}
    result = StudyAnswers()
    for question in questions:
        categories, mapping = _category_map(question["options"])
        info = ItemInfo(
            code=question["code"], order=question["order"], kind=question["kind"], phases=question["phases"],
            text=question["text"], construct=question["construct"], categories=categories,
        )
        by_id[question["pk"]] = (info, mapping)
        if info.kind != Question.Kind.TEXT:
            # Several instrument versions may share a code; the first seen describes it.
            result.items.setdefault(info.code, info)
    for participant_id, phase, question_id, numeric, value in rows:
        info, mapping = by_id[question_id]
        if info.kind == Question.Kind.TEXT:
            continue  # free text never enters a statistic
        result.respondents[phase].add(participant_id)
        if numeric is not None:
            result.numeric[phase].setdefault(info.code, {})[participant_id] = float(numeric)
        elif value and value.strip():
            label = mapping.get(value.strip().casefold())
            if label is None:
                result.unrecognised[info.code] = result.unrecognised.get(info.code, 0) + 1
                continue
            result.categorical[phase].setdefault(info.code, {})[participant_id] = label
    return result


def answers_fingerprint(study: Study) -> str:
    """Return a short string that changes whenever the counted answers may have changed (one query).

    Submitted responses are final (the survey service refuses edits after submission), so the number of
    counted responses and the latest submission time identify the answer set; a withdrawal lowers the count.
    """
    stats = (
        SurveyResponse.objects.filter(participant__study=study, submitted_at__isnull=False)
        .exclude(participant__status__in=_EXCLUDED_STATUSES)
        .aggregate(n=Count("pk"), last_submit=Max("submitted_at"))
    )
    latest = stats["last_submit"]
    return f"{stats['n']}-{int(latest.timestamp() * 1000) if latest else 0}"


# ------------------------------------------------------------------------------------ taking a survey

DEFAULT_INSTRUMENT_SLUG = "collabskill-attitudes"


def default_instrument() -> Instrument | None:
    """The active default instrument, newest version first."""
    return (Instrument.objects.filter(slug=DEFAULT_INSTRUMENT_SLUG, is_active=True).order_by("-version").first())


def instrument_for(participant: Participant, phase: str) -> Instrument | None:
    """The instrument a participant answers: the pre-survey's one for the post-survey, so items pair up."""
    if phase == SurveyResponse.Phase.POST:
        pre = (SurveyResponse.objects.filter(participant=participant, phase=SurveyResponse.Phase.PRE)
               .select_related("instrument").first())
        if pre is not None:
            return pre.instrument
    if participant.study.survey_instrument_id:
        return participant.study.survey_instrument
    return default_instrument()


def questions_for(instrument: Instrument, phase: str) -> list[Question]:
    phases = [Question.Phases.BOTH, Question.Phases.PRE if phase == SurveyResponse.Phase.PRE else Question.Phases.POST]
    return list(instrument.questions.filter(phases__in=phases).order_by("order", "code"))


def response_for(participant: Participant, phase: str) -> SurveyResponse | None:
    return SurveyResponse.objects.filter(participant=participant, phase=phase).first()


def saved_values(response: SurveyResponse | None) -> dict[int, str]:
    """Saved raw answers by question id."""
    if response is None:
        return {}
    return dict(Answer.objects.filter(response=response).values_list("question_id", "value"))


@dataclass
class SurveyItem:
    """One question as the page shows it, with the wording of the phase and the saved value."""

    question: Question
    text: str
    value: str
    error: str = ""

    @property
    def field_name(self) -> str:
        return f"q_{self.question.code}"

    @property
    def choices(self) -> list[dict[str, Any]]:
        return list((self.question.options or {}).get("choices", []))

    @property
    def levels(self) -> list[dict[str, Any]]:
        return list((self.question.options or {}).get("levels", []))

    @property
    def scale(self) -> list[int]:
        options = self.question.options or {}
        return list(range(int(options.get("min", 1)), int(options.get("max", 7)) + 1))


def question_text(question: Question, phase: str, *, prefix: str, occupation: str) -> str:
    """The wording for the phase: post items use their own text or the instrument's lead-in + the text."""
    text = question.text
    if phase == SurveyResponse.Phase.POST:
        text = question.post_text or (f"{prefix} {question.text}" if prefix else question.text)
    return text.replace("{occupation}", occupation or "your occupation")


def survey_items(*, participant: Participant, instrument: Instrument, phase: str,
                 response: SurveyResponse | None, overrides: dict[str, str] | None = None,
                 errors: dict[str, str] | None = None) -> list[SurveyItem]:
    """Build the page's items; ``overrides`` carries values just typed (kept when a submit is refused)."""
    saved = saved_values(response)
    occupation = participant.occupation.title if participant.occupation is not None else ""
    items = []
    for question in questions_for(instrument, phase):
        value = saved.get(question.pk, "")
        if overrides is not None and question.code in overrides:
            value = overrides[question.code]
        if not value and question.code == "D3" and participant.years_experience is not None:
            value = f"{participant.years_experience:g}"
        items.append(SurveyItem(
            question=question, text=question_text(question, phase, prefix=instrument.post_prefix,
                                                  occupation=occupation),
            value=value, error=(errors or {}).get(question.code, ""),
        ))
    return items


def has_levels(items: list[SurveyItem]) -> list[dict[str, Any]]:
    """The Human Agency Scale table shown above HAS items (empty when the survey has none)."""
    for item in items:
        if item.question.kind == Question.Kind.HAS and item.levels:
            return item.levels
    return []


def respondent_counts(study: Study) -> dict[str, int]:
    """Return how many participants the survey statistics count as respondents: ``pre``, ``post`` and ``both``.

    A respondent has a submitted response with at least one answer to a question that enters a statistic
    (free text does not), and has not withdrawn or declined: the same people :func:`study_answers` counts,
    read with one query so every staff page can show the number without loading the answers.
    """
    rows = (
        SurveyResponse.objects.filter(participant__study=study, submitted_at__isnull=False)
        .exclude(participant__status__in=_EXCLUDED_STATUSES)
        .filter(answers__question__kind__in=[kind for kind in Question.Kind if kind != Question.Kind.TEXT])
        .values_list("participant_id", "phase")
        .distinct()
    )
    phases: dict[str, set[int]] = {"pre": set(), "post": set()}
    for participant_id, phase in rows:
        phases.setdefault(phase, set()).add(participant_id)
    return {"pre": len(phases["pre"]), "post": len(phases["post"]), "both": len(phases["pre"] & phases["post"])}

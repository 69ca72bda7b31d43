"""Writes for taking surveys: install the default instrument, autosave answers, submit a response.

Answer coding (read by the dashboard's statistics through ``Answer.numeric`` / ``Answer.value``):
Likert items 1–7 as answered; Human Agency Scale H1 = 1 … H5 = 5; choice items carry the option's
``code`` (ordered so that higher means more familiarity / more use) and ``numeric`` is null when the
options have no code (A7, a nominal item whose ``value`` is the category, e.g. "Curious"); numbers as typed;
free text has no numeric value.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from studies.exceptions import StepNotAvailable, SurveyAnswerInvalid, SurveyIncomplete
from studies.models import Participant
from studies.services.participants import participant_complete, participant_pre_survey_done
from surveys.models import Answer, Instrument, Question, SurveyResponse
from surveys.selectors import instrument_for, questions_for

DEFAULT_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "default_instrument.json"
MAX_TEXT = 5000


def instrument_install_default() -> Instrument:
    """Create the default instrument from its fixture if it is missing (the data migration does the same)."""
    data = json.loads(DEFAULT_FIXTURE.read_text(encoding="utf-8"))
    with transaction.atomic():
        instrument, created = Instrument.objects.get_or_create(
            slug=data["slug"], version=data["version"],
            defaults={"title": data["title"], "post_prefix": data["post_prefix"], "is_active": True},
        )
        if created:
            for item in data["questions"]:
                options = item["options"]
                if item["kind"] == Question.Kind.HAS and not options:
                    options = {"levels": data["has_levels"]}
                Question.objects.create(instrument=instrument, options=options,
                                        **{k: item[k] for k in ("code", "order", "kind", "phases", "construct",
                                                                "text", "post_text", "help_text", "required")})
    return instrument


def answer_code(question: Question, raw: Any) -> tuple[str, float | None]:
    """Validate a raw answer and return (value, numeric); raise SurveyAnswerInvalid with a clear message."""
    value = "" if raw is None else str(raw).strip()
    options = question.options or {}
    kind = question.kind
    if kind == Question.Kind.LIKERT:
        low: float
        high: float
        low, high = int(options.get("min", 1)), int(options.get("max", 7))
        if not value.isdigit() or not low <= int(value) <= high:
            raise SurveyAnswerInvalid(f"Choose a point from {low} to {high}.")
        return str(int(value)), float(int(value))
    if kind == Question.Kind.HAS:
        levels = {str(level["value"]): level.get("code") for level in options.get("levels", [])} or \
            {f"H{i}": i for i in range(1, 6)}
        if value not in levels:
            raise SurveyAnswerInvalid("Choose one level of the scale, H1 to H5.")
        code = levels[value]
        return value, float(code) if code is not None else float(value[1:])
    if kind == Question.Kind.CHOICE:
        for choice in options.get("choices", []):
            if str(choice["value"]) == value:
                code = choice.get("code")
                return value, float(code) if code is not None else None
        raise SurveyAnswerInvalid("Choose one of the options shown.")
    if kind == Question.Kind.NUMBER:
        try:
            number = float(value.replace(",", "."))
        except ValueError:
            raise SurveyAnswerInvalid("Enter a number, for example 4 or 2.5.")
        low, high = float(options.get("min", 0)), float(options.get("max", 1e9))
        if not math.isfinite(number) or not low <= number <= high:
            raise SurveyAnswerInvalid(f"Enter a number between {low:g} and {high:g}.")
        step = float(options.get("step") or 0)
        if step > 0 and not math.isclose((number - low) / step, round((number - low) / step), abs_tol=1e-9):
            raise SurveyAnswerInvalid("Enter whole or half years, for example 4 or 2.5." if step == 0.5 else
                                      f"Enter a multiple of {step:g}.")
        return f"{number:g}", number
    if len(value) > MAX_TEXT:
        raise SurveyAnswerInvalid(f"Please keep the answer under {MAX_TEXT} characters.")
    return value, None


def _editable_response(*, participant: Participant, phase: str) -> SurveyResponse:
    if phase not in SurveyResponse.Phase.values:
        raise StepNotAvailable("Unknown survey.")
    if participant.status == Participant.Status.WITHDRAWN:
        raise StepNotAvailable("You have withdrawn from this study, so answers are no longer saved.")
    open_status = Participant.Status.PRE_SURVEY if phase == SurveyResponse.Phase.PRE else Participant.Status.POST_SURVEY
    already_done = SurveyResponse.objects.filter(participant=participant, phase=phase, submitted_at__isnull=False)
    if participant.status != open_status and not already_done.exists():
        raise StepNotAvailable("The first survey opens after your profile is saved." if phase == "pre" else
                               "The final survey opens after your last task.")
    response = SurveyResponse.objects.filter(participant=participant, phase=phase).select_related("instrument").first()
    if response is None:
        instrument = instrument_for(participant, phase)
        if instrument is None:
            raise StepNotAvailable("The survey is not set up yet. Please contact the study team.")
        try:
            with transaction.atomic():
                response = SurveyResponse.objects.create(participant=participant, instrument=instrument, phase=phase)
        except IntegrityError:
            response = SurveyResponse.objects.get(participant=participant, phase=phase)
    if response.submitted_at is not None:
        raise StepNotAvailable("You already submitted this survey; your answers are kept as sent.")
    return response


def answers_save(*, participant: Participant, phase: str, raw: dict[str, Any]) -> dict[str, str]:
    """Autosave: store every valid answer in ``raw`` (by question code), clear emptied ones, and return the
    problems of the others by code. Answers saved earlier are never lost because of a bad new value."""
    response = _editable_response(participant=participant, phase=phase)
    questions = {q.code: q for q in questions_for(response.instrument, phase)}
    errors: dict[str, str] = {}
    cleared: list[int] = []
    coded_answers: dict[int, tuple[str, float | None]] = {}
    for code, value in raw.items():
        question = questions.get(code)
        if question is None:
            errors[code] = "This question is not part of the survey."
            continue
        if value is None or str(value).strip() == "":
            cleared.append(question.pk)
            continue
        try:
            coded_answers[question.pk] = answer_code(question, value)
        except SurveyAnswerInvalid as exc:
            errors[code] = exc.message
    # One read, one delete and one upsert whatever the number of answers: a submit re-sends every answer the
    # page autosaved already, and those unchanged ones are not written again.
    existing = dict(Answer.objects.filter(response=response, question_id__in=[*cleared, *coded_answers])
                    .values_list("question_id", "value"))
    changed = [Answer(response=response, question_id=question_id, value=coded, numeric=numeric)
               for question_id, (coded, numeric) in coded_answers.items() if existing.get(question_id) != coded]
    with transaction.atomic():
        if any(question_id in existing for question_id in cleared):
            Answer.objects.filter(response=response, question_id__in=cleared).delete()
        if changed:
            Answer.objects.bulk_create(changed, update_conflicts=True, unique_fields=["response", "question"],
                                       update_fields=["value", "numeric", "updated_at"])
    return errors


def response_submit(*, participant: Participant, phase: str, raw: dict[str, Any]) -> SurveyResponse:
    """Save the answers and submit; refuse (keeping what was saved) while a required answer is missing."""
    errors = answers_save(participant=participant, phase=phase, raw=raw)
    with transaction.atomic():
        response = SurveyResponse.objects.select_for_update(of=("self",)).select_related("instrument").get(
            participant=participant, phase=phase
        )
        if response.submitted_at is not None:
            raise StepNotAvailable("You already submitted this survey; your answers are kept as sent.")
        answered = set(Answer.objects.filter(response=response).values_list("question__code", flat=True))
        problems = {q.code: "Please answer this question." for q in questions_for(response.instrument, phase)
                    if q.required and q.code not in answered}
        problems.update(errors)
        if problems:
            raise SurveyIncomplete(
                (f"{len(problems)} answer is missing or needs a correction" if len(problems) == 1 else
                 f"{len(problems)} answers are missing or need a correction") + "; everything else is saved.",
                errors=problems,
            )
        response.submitted_at = timezone.now()
        response.save(update_fields=["submitted_at"])
    if phase == SurveyResponse.Phase.PRE:
        participant_pre_survey_done(participant=participant)
    else:
        participant_complete(participant=participant)
    return response

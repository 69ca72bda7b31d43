"""Survey responses: submitted pre and post surveys with plausible coded answers."""

from __future__ import annotations

import numpy as np
from django.utils import timezone

from studies import models as m
from surveys.models import Answer, Instrument, Question, SurveyResponse
from surveys.services import instrument_install_default

ORIENTATIONS = ("Excited", "Curious", "Neutral", "Skeptical", "Anxious")


def default_instrument() -> Instrument:
    """Return the default instrument (a transactional test's flush removes the migration's copy)."""
    return instrument_install_default()


def add_survey(participant: m.Participant, rng: np.random.Generator, *, phases=("pre", "post")) -> None:
    """Give the participant submitted pre and post surveys with plausible coded answers."""
    instrument = default_instrument()
    questions = {q.code: q for q in Question.objects.filter(instrument=instrument)}
    now = timezone.now()
    base = {code: int(rng.integers(1, 8)) for code in ("A1", "A2", "A3", "A6")}
    base.update({code: int(rng.integers(1, 6)) for code in ("A4", "A5")})
    for phase in phases:
        response = SurveyResponse.objects.create(participant=participant, instrument=instrument, phase=phase,
                                                 submitted_at=now)
        answers = []
        if phase == "pre":
            d1 = int(rng.integers(1, 5))
            answers.append(Answer(response=response, question=questions["D1"], value=str(d1), numeric=float(d1)))
            d2 = int(rng.integers(1, 6))
            answers.append(Answer(response=response, question=questions["D2"], value=str(d2), numeric=float(d2)))
            years = float(rng.integers(0, 30))
            answers.append(Answer(response=response, question=questions["D3"], value=f"{years:g}", numeric=years))
        for code, value in base.items():
            if phase == "post":
                high = 5 if code in ("A4", "A5") else 7
                value = int(np.clip(value + rng.integers(-1, 3), 1, high))
            raw = f"H{value}" if code in ("A4", "A5") else str(value)
            answers.append(Answer(response=response, question=questions[code], value=raw, numeric=float(value)))
        answers.append(
            Answer(response=response, question=questions["A7"], value=str(rng.choice(ORIENTATIONS)), numeric=None)
        )
        Answer.objects.bulk_create(answers)

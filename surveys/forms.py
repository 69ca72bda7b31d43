"""Input parsing for the survey pages: the whole-page form and the autosave request."""

from __future__ import annotations

from surveys.models import Question

FIELD_PREFIX = "q_"


def raw_answers(data, questions: list[Question]) -> dict[str, str]:
    """Collect the raw values the page sent. A field that is absent (an untouched radio group) is left out,
    so it never clears an answer saved earlier, e.g. from another tab; a field sent empty clears it."""
    return {q.code: (data.get(FIELD_PREFIX + q.code) or "").strip() for q in questions
            if FIELD_PREFIX + q.code in data}


# A page has a few dozen questions; an autosave naming more than this is not from the page.
MAX_AUTOSAVE_ANSWERS = 200
MAX_CODE = 16
MAX_VALUE = 6000


class AutosaveInvalid(ValueError):
    """The autosave request could not be read (not an answer that failed validation)."""


def autosave_answers(data) -> dict[str, str]:
    """Return the answers an autosave request carries, ``{code: value}`` in the order sent.

    The page's script sends the answers changed since its last save together (repeated ``code`` / ``value``
    fields, pairwise; a later pair for the same code wins). Raises :class:`AutosaveInvalid` when the pairs do
    not match up, name no answer or too many, or a code or value is over its length limit.
    """
    codes, values = data.getlist("code"), data.getlist("value")
    if not codes or len(codes) != len(values) or len(codes) > MAX_AUTOSAVE_ANSWERS:
        raise AutosaveInvalid("The answers could not be read; please try again.")
    answers: dict[str, str] = {}
    for code, value in zip(codes, values, strict=True):
        code, value = code.strip(), value.strip()
        if not code or len(code) > MAX_CODE or len(value) > MAX_VALUE:
            raise AutosaveInvalid("The answers could not be read; please try again.")
        answers[code] = value
    return answers

"""The survey statistics of one study (paper §6.2, Figure 4): stored answers in, JSON-ready tables out.

Skill is each participant's CollabSkill score μ − kσ in the latest posterior snapshot by default (the
estimate the paper correlates with), or the posterior mean μ on request. Holm-adjusted p-values are given
next to the raw ones, each table being its own family. The tests themselves are the pure functions of
:mod:`surveys.stats`; this module feeds them a study's stored answers.
"""

from __future__ import annotations

import json
from typing import Any

from rating.selectors import SKILL_MEASURES, human_skill, snapshot_model_kind
from studies.models import Study
from surveys import stats
from surveys.models import Question
from surveys.selectors import StudyAnswers, study_answers

_NUMERIC_KINDS = {Question.Kind.LIKERT, Question.Kind.HAS, Question.Kind.NUMBER, Question.Kind.CHOICE}


def _items_payload(answers: StudyAnswers, codes: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "code": code,
            "text": answers.items[code].text,
            "construct": answers.items[code].construct,
            "kind": answers.items[code].kind,
        }
        for code in codes
        if code in answers.items
    ]


def survey_statistics(study: Study, *, skill_measure: str = "conservative", holm_correction: bool = True) -> dict:
    """Return the study's paired survey statistics as JSON-serialisable data.

    Keys: ``paired`` (Figure 4(c): n, means, Δ, SE, Wilcoxon W/p, effect size per paired item),
    ``pre_correlations`` (4(a): Spearman ρ with 95 % CI of each pre-survey item with skill),
    ``change_correlations`` (4(b): ρ of each item's change with skill), ``skill_split`` (Mann-Whitney U of
    change below vs above median skill), ``categorical`` (pre × post tables of nominal items such as A7),
    plus counts, the snapshot version the skill came from and ``empty`` when nobody has answered yet.
    """
    answers = study_answers(study)
    skill, snapshot = human_skill(study, skill_measure)
    pre, post = answers.numeric["pre"], answers.numeric["post"]
    numeric_codes = [code for code in set(pre) | set(post) if answers.items[code].kind in _NUMERIC_KINDS]
    paired_codes = answers.ordered_codes(code for code in numeric_codes if code in pre and code in post)
    pre_codes = answers.ordered_codes(code for code in numeric_codes if code in pre)
    categorical_codes = answers.ordered_codes(
        code for code in set(answers.categorical["pre"]) & set(answers.categorical["post"])
    )

    paired = stats.paired_table(pre, post, paired_codes, holm_correction=holm_correction)
    pre_corr = stats.correlate_items_with_skill(
        pre, skill, pre_codes, skill_label=skill_measure, holm_correction=holm_correction
    )
    change_corr = stats.correlate_changes_with_skill(
        pre, post, skill, paired_codes, skill_label=skill_measure, holm_correction=holm_correction
    )
    split = stats.skill_split_table(pre, post, skill, paired_codes, holm_correction=holm_correction)
    categorical = []
    for code in categorical_codes:
        categories = answers.items[code].categories or stats.AFFECTIVE_ORIENTATIONS
        categorical.append(
            stats.category_shift(answers.categorical["pre"][code], answers.categorical["post"][code], code, categories)
        )
    respondents_pre, respondents_post = answers.respondents["pre"], answers.respondents["post"]
    notes = []
    if snapshot is None:
        notes.append("No posterior snapshot yet: correlations with skill and the median split are not computed.")
    for code, count in sorted(answers.unrecognised.items()):
        notes.append(f"{count} answer(s) to {code} match none of the question's options and were left out.")
    result = {
        "skill_measure": skill_measure,
        "skill_label": SKILL_MEASURES[skill_measure],
        "snapshot_version": snapshot.version if snapshot else None,
        # Skill comes from the snapshot, i.e. from the study's rating model when it was computed.
        "rating_model": snapshot_model_kind(snapshot),
        "holm_correction": holm_correction,
        "n_respondents_pre": len(respondents_pre),
        "n_respondents_post": len(respondents_post),
        "n_respondents_both": len(respondents_pre & respondents_post),
        "n_with_skill": len(skill),
        "empty": not (respondents_pre or respondents_post),
        "items": _items_payload(answers, answers.ordered_codes(answers.items)),
        "paired": [result.to_dict() for result in paired],
        "pre_correlations": [result.to_dict() for result in pre_corr],
        "change_correlations": [result.to_dict() for result in change_corr],
        "skill_split": [result.to_dict() for result in split],
        "categorical": [result.to_dict() for result in categorical],
        "notes": notes,
    }
    # Round-trip through JSON so callers get exactly what a cache or an API response will hold (lists, not tuples).
    return json.loads(json.dumps(result, allow_nan=False))

"""The admin's words: counts agree with their nouns, and model names are spelled as plurals once."""

from __future__ import annotations

from django.apps import apps

from grading.admin import _counted

PROJECT_APPS = {"studyapp", "grading", "experts", "surveys", "pairing", "console", "journey"}


def test_counts_in_the_transcript_files_report_agree_with_their_noun():
    assert _counted(1, "prompt") == "1 prompt"
    assert _counted(14, "prompt") == "14 prompts"
    assert _counted(0, "tool call") == "0 tool calls"


def test_no_model_is_named_with_a_doubled_or_latin_plural_mistake():
    """"Criterions" and "…rowss" read as typos on the admin index; the rating models are checked with theirs."""
    wrong = []
    for model in apps.get_models():
        if model._meta.app_label not in PROJECT_APPS:
            continue
        singular, plural = str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
        # Django's default plural appends "s": wrong for a name already plural, and for "criterion".
        if plural == singular + "s" and (singular.endswith("s") or singular.endswith("criterion")):
            wrong.append(f"{model._meta.label}: {plural}")
    assert wrong == []

"""Rename stored AI-fluency behaviour codes to the paper's keys (App. H) so codings merge with its data."""

from django.db import migrations

RENAMES = {
    "clarifies_goal": "clarifies_goal_before_asking",
    "provides_examples": "provides_examples_of_good",
    "specifies_format": "specifies_format_and_structure",
    "tone_and_style": "communication_tone_and_style",
    "questions_reasoning": "questions_ai_reasoning",
    "consults_on_approach": "consults_ai_on_approach",
    "checks_facts": "checks_facts_and_claims",
}


def _rename(apps, mapping):
    FluencyCoding = apps.get_model("grading", "FluencyCoding")
    for coding in FluencyCoding.objects.exclude(behaviours={}).iterator(chunk_size=500):
        behaviours = coding.behaviours or {}
        renamed = {mapping.get(code, code): entry for code, entry in behaviours.items()}
        if renamed != behaviours:
            FluencyCoding.objects.filter(pk=coding.pk).update(behaviours=renamed)


def forwards(apps, schema_editor):
    _rename(apps, RENAMES)


def backwards(apps, schema_editor):
    _rename(apps, {new: old for old, new in RENAMES.items()})


class Migration(migrations.Migration):
    dependencies = [("grading", "0004_episode_transcripts")]
    operations = [migrations.RunPython(forwards, backwards)]

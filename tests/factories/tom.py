"""A solo-condition study with ToM coding on and every with-agent episode coded by both judges of its pair."""

from __future__ import annotations

from grading.models import ProcessCoding
from studies.models import Episode, Study
from tests.factories.synergy import planted_synergy_study

PAIR = [{"provider": "openai", "model": "gpt-4.1"}, {"provider": "anthropic", "model": "claude-sonnet-4-6"}]
LABELS = ("openai/gpt-4.1", "anthropic/claude-sonnet-4-6")


def tom_coding(episode: Episode, judge: dict[str, str], instrument: str, score: int | None,
               **kw) -> ProcessCoding:
    return ProcessCoding(episode=episode, instrument=instrument, prompt_version="v1", provider=judge["provider"],
                         model=judge["model"], family=judge["provider"], status=kw.pop("status", "succeeded"),
                         score=score, is_current=True, reason="r", **kw)


def tom_study(workers: int = 12, slug: str = "tom", simulated: bool = False) -> Study:
    """ToM from the episode id (so alignment is checkable), quality one point above it (capped at 5)."""
    study = planted_synergy_study(workers=workers, tasks=8, slug=slug).world.study
    study.tom_coding, study.tom_coders = True, PAIR
    study.save(update_fields=["tom_coding", "tom_coders"])
    rows = []
    for episode in Episode.objects.filter(study=study, condition="with_agent"):
        for j, judge in enumerate(PAIR):
            tom = (episode.pk + j) % 6
            rows += [tom_coding(episode, judge, "tom", tom, is_simulated=simulated),
                     tom_coding(episode, judge, "response_quality", min(5, tom + 1), is_simulated=simulated)]
    ProcessCoding.objects.bulk_create(rows)
    return study

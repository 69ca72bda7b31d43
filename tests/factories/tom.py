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


def planted_tom(episode: Episode, judge_index: int) -> int:
    """The ToM code judge ``judge_index`` gives ``episode``: from the worker's number and the task's position, so
    alignment is checkable, and never from a primary key (which depends on the tests that ran before); the
    worker part dominates, so the moderation fit converges with only 12 workers."""
    worker = int(episode.participant.pseudonym.rsplit("-", 1)[1])
    return (worker + (episode.position + judge_index) % 2) % 6


def planted_tom_mean(episode: Episode) -> float:
    return (planted_tom(episode, 0) + planted_tom(episode, 1)) / 2


def tom_study(workers: int = 12, slug: str = "tom", simulated: bool = False) -> Study:
    """ToM from :func:`planted_tom`, quality one point above it (capped at 5)."""
    study = planted_synergy_study(workers=workers, tasks=8, slug=slug).world.study
    study.tom_coding, study.tom_coders = True, PAIR
    study.save(update_fields=["tom_coding", "tom_coders"])
    rows = []
    for episode in Episode.objects.filter(study=study, condition="with_agent").select_related("participant"):
        for j, judge in enumerate(PAIR):
            tom = planted_tom(episode, j)
            rows += [tom_coding(episode, judge, "tom", tom, is_simulated=simulated),
                     tom_coding(episode, judge, "response_quality", min(5, tom + 1), is_simulated=simulated)]
    ProcessCoding.objects.bulk_create(rows)
    return study

"""Writes of the demo's simulated effort measures (`grading.models.SimulatedEffort`), refusing any real episode.

Simulated effort must never mix into a real study's numbers or stand in for a log that exists: only a simulated
episode with no collaboration log file may carry it. A refused batch writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from grading.models import SimulatedEffort
from studies.models import Episode, EpisodeFile

__all__ = ["EffortDraw", "simulated_effort_record"]


@dataclass(frozen=True)
class EffortDraw:
    """One simulated episode's drawn effort: the worker's prompts, characters written, edit ratio (0-1)."""

    episode_id: int
    worker_turns: int
    worker_chars: int
    edit_ratio: float


def _refusal(draws: Sequence[EffortDraw]) -> str | None:
    ids = [d.episode_id for d in draws]
    if len(set(ids)) != len(ids):
        return "an episode appears more than once"
    found = dict(Episode.objects.filter(pk__in=ids).values_list("pk", "is_simulated"))
    if missing := sorted(set(ids) - set(found)):
        return f"no episode {missing[0]}"
    if real := sorted(pk for pk, simulated in found.items() if not simulated):
        return f"episode {real[0]} is not simulated: simulated effort is for demonstration episodes only"
    logged = EpisodeFile.objects.filter(episode_id__in=ids, kind=EpisodeFile.Kind.LOG)
    if (pk := logged.values_list("episode_id", flat=True).first()) is not None:
        return f"episode {pk} has a collaboration log: its effort is read from the log, not simulated"
    bad = next((d for d in draws if d.worker_turns < 1 or d.worker_chars < 0 or not 0.0 <= d.edit_ratio <= 1.0),
               None)
    if bad is not None:
        return f"episode {bad.episode_id}: turns must be at least 1, characters at least 0, edit ratio 0-1"
    return None


def simulated_effort_record(draws: Sequence[EffortDraw]) -> int:
    """Store each simulated episode's effort draw; ValueError (nothing written) if any episode is refused."""
    if (reason := _refusal(draws)) is not None:
        raise ValueError(f"simulated effort refused: {reason}")
    with transaction.atomic():
        SimulatedEffort.objects.bulk_create([
            SimulatedEffort(episode_id=d.episode_id, worker_turns=d.worker_turns, worker_chars=d.worker_chars,
                            edit_ratio=d.edit_ratio) for d in draws])
    return len(draws)

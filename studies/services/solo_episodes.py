"""Working on a solo episode: the task done without any AI tool (the solo condition, studies/conditions.py).

A solo task has the same uploads, time limit, payment and grading as an agent task; it has no agent setup and
no collaboration log. The worker may say honestly that they used an AI tool anyway, which is recorded on the
episode (the synergy analysis reports and can leave out those episodes) and never refused.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from studies.exceptions import SubmitRejected
from studies.models import Episode
from studies.services.audit import audit_record
from studies.services.uploads import ensure_editable


def ensure_with_agent(episode: Episode) -> None:
    """Refuse an agent step (setup, setup failure, log link) on a solo episode with a clear message."""
    if episode.condition == Episode.Condition.SOLO:
        raise SubmitRejected("This task is done without any AI tool, so there is no agent to set up and no "
                             "collaboration log. Nothing was changed.")


def episode_solo_save(*, episode: Episode, used_ai_anyway: bool, notes: str | None, actor: Any) -> Episode:
    """Save a solo episode's "I used an AI tool anyway" answer and notes (a draft: nothing is submitted).

    ``notes=None`` keeps the stored notes (the answer is saved while over-long notes are being shortened).
    """
    if episode.condition != Episode.Condition.SOLO:
        raise SubmitRejected("This task is done with an agent; its log and notes are saved in the log panel.")
    with transaction.atomic():
        locked = Episode.objects.select_for_update(of=("self",)).select_related("study").get(pk=episode.pk)
        ensure_editable(locked)
        before = locked.used_ai_anyway
        locked.used_ai_anyway = bool(used_ai_anyway)
        if notes is not None:
            locked.notes = notes.strip()[:5000]
        fields = ["used_ai_anyway", "notes", "updated_at"]
        if locked.status == Episode.Status.ASSIGNED:
            locked.status = Episode.Status.IN_PROGRESS  # the worker is on it, as a confirmed setup says for agents
            fields.append("status")
        locked.save(update_fields=fields)
        if before != locked.used_ai_anyway:
            audit_record(actor=actor, action="episode.used_ai_anyway", obj=locked, study=locked.study,
                         before={"used_ai_anyway": before}, after={"used_ai_anyway": locked.used_ai_anyway})
    return locked

"""Writes of the rating ledger: one observation per scored episode, one grade row per grade of it (for the
judge-aware model), retractions, re-recording a study.

Why the stored rating is exact: the posterior depends only on the *set* of active observations (its
information form is a sum over participants), and a refit solves that whole set from scratch. Recording
therefore only has to keep the ledger right -- one row per episode, updated in place on a regrade,
deactivated on exclusion -- plus, for the live updates between refits, one ``LedgerChange`` row per change to
what an observation counts, with what it counted before (written in the same transaction, so the queue of
changes and the ledger never disagree).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from rating.exceptions import InvalidScore
from rating.models import GradeObservation, LedgerChange, Observation
from rating.services.refresh import posterior_schedule_refresh
from studies.model_families import normalise_family
from studies.models import Episode, Participant, Study
from studies.services.audit import audit_record

logger = logging.getLogger(__name__)

# Retraction reasons starting with this stay retracted when the episode is recorded again (see
# observations_retract_participant).
PARTICIPANT_RETRACTION = "participant retracted"
SOLO_EXCLUSION = "solo episode: no agent to rate"
EXCLUDED_PARTICIPANT_STATUSES = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)


# --------------------------------------------------------------------------------------------------------
# Recording one episode
# --------------------------------------------------------------------------------------------------------

Counted = tuple[int, float, float] | None  # (agent, y, weight) of an active observation; None when it does not count


def _counted(observation: Observation | None) -> Counted:
    if observation is None or not observation.active:
        return None
    return (observation.agent_id, float(observation.y), float(observation.weight))


def _change_log(observation: Observation, before: Counted) -> None:
    """Queue a live update when what the observation counts changed (see rating.services.live)."""
    if before == _counted(observation):
        return
    LedgerChange.objects.create(
        study_id=observation.study_id, observation_id=observation.pk, participant_id=observation.participant_id,
        was_active=before is not None, old_agent_id=None if before is None else before[0],
        old_y=None if before is None else before[1], old_weight=None if before is None else before[2],
    )



def episode_rating_score(*, episode: Episode, study: Study) -> tuple[float | None, str]:
    """Return ``(y, source)`` for the episode under the study's score source.

    ``auto`` and ``expert`` take that score or nothing. ``blended`` takes
    ``w * expert + (1 - w) * auto`` (``w = study.blend_expert_weight``) when both exist, else whichever
    exists, and then names that single source -- so the ledger says what y really is, and a later second
    score turns it into a blend through the ordinary regrade path.
    """
    auto, expert = episode.auto_score, episode.expert_score
    source = study.score_source
    if source == Study.ScoreSource.AUTO:
        y, used = auto, Episode.ScoreSource.AUTO
    elif source == Study.ScoreSource.EXPERT:
        y, used = expert, Episode.ScoreSource.EXPERT
    elif auto is not None and expert is not None:
        weight = study.blend_expert_weight
        y, used = weight * expert + (1.0 - weight) * auto, Episode.ScoreSource.BLENDED
    elif expert is not None:
        y, used = expert, Episode.ScoreSource.EXPERT
    else:
        y, used = auto, Episode.ScoreSource.AUTO
    if y is None:
        return None, ""
    y = float(y)
    if not math.isfinite(y) or not 0.0 <= y <= 100.0:
        raise InvalidScore(f"episode {episode.pk}: score {y!r} from {used} is not between 0 and 100")
    return y, str(used)


def _exclusion_reason(episode: Episode, y: float | None) -> str:
    """Return why the episode must not count (empty when it counts)."""
    reason = _episode_exclusion(episode, None)
    if reason:
        return reason
    if y is None:
        return "no score"
    return ""


def _episode_exclusion(episode: Episode, observation: Observation | None) -> str:
    """Return why none of the episode's scores may count, whatever they are (empty when they may).

    A participant retraction recorded on the observation is kept: a late regrade cannot bring it back.
    """
    if observation is not None and not observation.active and observation.retraction_reason.startswith(
            PARTICIPANT_RETRACTION):
        return observation.retraction_reason
    if episode.condition == Episode.Condition.SOLO:
        # Done without an agent: the CollabSkill ledger rates agents and humans together, so a solo score
        # would count as some agent's. The synergy model reads solo episodes itself (rating/services/synergy.py).
        return SOLO_EXCLUSION
    if episode.status == Episode.Status.SKIPPED:
        return "episode skipped"
    if episode.participant.status in EXCLUDED_PARTICIPANT_STATUSES:
        return f"participant {episode.participant.get_status_display().lower()}"
    if episode.is_gold:
        # Planted known-answer copies check experts; counting them would count one session twice.
        return "gold QA episode"
    return ""


def _episode_score_set(episode: Episode, y: float | None, source: str) -> bool:
    """Store y on the episode, auditing only a real change (re-delivery must not spam the audit log)."""
    if episode.score == y and episode.score_source == source:
        return False
    before = {"score": episode.score, "score_source": episode.score_source}
    episode.score, episode.score_source = y, source
    episode.save(update_fields=["score", "score_source", "updated_at"])
    audit_record(
        actor=None,
        action="episode.score_set",
        obj=episode,
        study=episode.study,
        before=before,
        after={"score": y, "score_source": source},
        note=f"rating: y follows the study's '{episode.study.score_source}' score source",
    )
    return True


def observation_record(*, episode_id: int, schedule_refresh: bool = True) -> Observation | None:
    """Bring the episode's score and its ledger observation up to date; return the observation.

    Locks the episode row, so concurrent deliveries for one episode run one after the other and the
    second sees the first's row (no duplicate, no lost update). Re-delivery with unchanged inputs writes
    nothing. A regrade rewrites y in place; an excluded episode (skipped, participant withdrawn, gold
    copy, no score) has its observation deactivated with the reason. Other statuses do not matter: while
    a regrade is in progress the previous score keeps counting until the new one is recorded. Returns
    ``None`` when the episode does not exist or never had a counted observation. A changed ledger
    schedules a debounced refresh (unless the caller schedules one for a whole batch).
    """
    with transaction.atomic():
        episode = (
            Episode.objects.select_for_update(of=("self",))
            .select_related("study", "participant", "task")
            .filter(pk=episode_id)
            .first()
        )
        if episode is None:
            return None
        study = episode.study
        y, source = episode_rating_score(episode=episode, study=study)
        _episode_score_set(episode, y, source)
        reason = _exclusion_reason(episode, y)
        observation = Observation.objects.filter(episode_id=episode.pk).first()
        if (
            observation is not None
            and not observation.active
            and observation.retraction_reason.startswith(PARTICIPANT_RETRACTION)
        ):
            reason = observation.retraction_reason
        ledger_changed = _grades_follow_episode(episode, _episode_exclusion(episode, observation))
        before = _counted(observation)
        if reason:
            if observation is not None and observation.active:
                observation.active = False
                observation.retraction_reason = reason[:255]
                observation.save(update_fields=["active", "retraction_reason", "updated_at"])
                audit_record(
                    actor=None, action="observation.retract", obj=observation, study=study,
                    before={"active": True, "y": observation.y}, after={"active": False}, note=reason,
                )
                ledger_changed = True
        else:
            wanted = {
                "study_id": study.pk,
                "agent_id": episode.agent_id,
                "participant_id": episode.participant_id,
                "task_id": episode.task_id,
                "task_uuid": episode.task.uuid,
                "y": y,
                "source": source,
                "active": True,
                "retraction_reason": "",
            }
            if observation is None:
                observation = Observation.objects.create(episode=episode, **wanted)
                ledger_changed = True
            else:
                changes = {name: value for name, value in wanted.items() if getattr(observation, name) != value}
                if changes:
                    was_active = observation.active
                    for name, value in changes.items():
                        setattr(observation, name, value)
                    observation.save()
                    ledger_changed = True
                    if not was_active:
                        audit_record(
                            actor=None, action="observation.reactivate", obj=observation, study=study,
                            before={"active": False}, after={"active": True, "y": y},
                        )
        if observation is not None:
            _change_log(observation, before)
        if ledger_changed and schedule_refresh:
            study_id = study.pk
            transaction.on_commit(lambda: posterior_schedule_refresh(study_id=study_id))
    return observation


# --------------------------------------------------------------------------------------------------------
# Recording an episode's grades (the judge-aware model's observations)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GradeInput:
    """One current grade of an episode, as the grading app or the expert workspace hands it over."""

    grader: str  # "provider/model" for a judge, "expert:<id>" for an expert
    family: str  # the grader's model family; "" for an expert
    y: float
    source_id: int  # the judge run or expert grade


def _grades_follow_episode(episode: Episode, reason: str) -> bool:
    """Make the episode's grade rows count or not as the episode does; return whether any row changed."""
    rows = GradeObservation.objects.filter(episode_id=episode.pk)
    if any(row.retraction_reason.startswith(PARTICIPANT_RETRACTION) for row in rows if not row.active):
        reason = reason or next(row.retraction_reason for row in rows if not row.active
                                and row.retraction_reason.startswith(PARTICIPANT_RETRACTION))
    if reason:
        counting = rows.exclude(retraction_reason=SUPERSEDED).exclude(active=False, retraction_reason=reason[:255])
        changed = counting.update(active=False, retraction_reason=reason[:255], updated_at=timezone.now())
    else:
        changed = rows.filter(active=False).exclude(retraction_reason=SUPERSEDED).update(
            active=True, retraction_reason="", updated_at=timezone.now())
    return bool(changed)


SUPERSEDED = "no longer a current grade"


def episode_grades_record(*, episode_id: int, kind: str, grades: Sequence[GradeInput]) -> bool:
    """Make ``grades`` the episode's current grades of one kind (judge or expert); return whether the grade
    ledger changed.

    The grading pipeline calls it with the judge runs that make up the episode's current score, the expert
    workspace with the submitted expert grades of the latest attempt, each inside the transaction that changed
    them, so the grade rows commit with the grades. Rows of graders no longer current stay, inactive, for the
    record. Episodes that must not count keep their rows inactive with the reason. A changed ledger of a
    judge-aware study schedules a refresh.
    """
    if kind not in GradeObservation.GraderKind.values:
        raise ValueError(f"kind must be one of {GradeObservation.GraderKind.values}, got {kind!r}")
    wanted = {}
    for grade in grades:
        y = float(grade.y)
        if not math.isfinite(y) or not 0.0 <= y <= 100.0:
            raise InvalidScore(f"episode {episode_id}: grade {y!r} from {grade.grader} is not between 0 and 100")
        if grade.grader in wanted:
            raise ValueError(f"grades: {grade.grader} grades episode {episode_id} twice")
        wanted[grade.grader] = grade
    with transaction.atomic():
        episode = (Episode.objects.select_for_update(of=("self",)).select_related("study", "participant", "agent")
                   .filter(pk=episode_id).first())
        if episode is None or episode.condition == Episode.Condition.SOLO:
            return False  # a solo episode has no agent, so no grade row of the judge-aware model
        observation = Observation.objects.filter(episode_id=episode.pk).first()
        reason = _episode_exclusion(episode, observation)
        changed = False
        existing = {row.grader: row for row in GradeObservation.objects.filter(episode=episode, grader_kind=kind)}
        for grader, row in existing.items():
            if grader not in wanted and (row.active or row.retraction_reason != SUPERSEDED):
                row.active, row.retraction_reason = False, SUPERSEDED
                row.save(update_fields=["active", "retraction_reason", "updated_at"])
                changed = True
        for grader, grade in wanted.items():
            values = {
                "study_id": episode.study_id, "agent_id": episode.agent_id, "participant_id": episode.participant_id,
                "task_id": episode.task_id, "grader_kind": kind, "grader_family": normalise_family(grade.family),
                "agent_family": normalise_family(episode.agent.family if episode.agent else ""), "y": float(grade.y),
                "source_id": grade.source_id,
            }
            row = existing.get(grader)
            if row is None:
                GradeObservation.objects.create(episode=episode, grader=grader, active=False, **values)
                changed = True
            elif any(getattr(row, name) != value for name, value in values.items()) or (
                    row.retraction_reason == SUPERSEDED):
                for name, value in values.items():
                    setattr(row, name, value)
                kept = row.retraction_reason if row.retraction_reason.startswith(PARTICIPANT_RETRACTION) else ""
                row.active, row.retraction_reason = False, kept
                row.save()
                changed = True
        # New and refreshed rows start inactive; one rule then decides, for the episode, what counts.
        changed = _grades_follow_episode(episode, reason) or changed
        if changed and episode.study.rating_model == Study.RatingModel.JUDGE_AWARE:
            study_id = episode.study_id
            transaction.on_commit(lambda: posterior_schedule_refresh(study_id=study_id))
    return changed


def observations_retract_participant(*, participant_id: int, reason: str) -> int:
    """Retract every observation of a participant (withdrawal); return how many were active.

    All the participant's observations are marked with a ``participant retracted: <reason>`` reason, which
    :func:`observation_record` keeps: a late regrade of one of their episodes cannot bring it back.
    """
    note = reason.strip() or "no reason given"
    marker = f"{PARTICIPANT_RETRACTION}: {note}"[:255]
    with transaction.atomic():
        # NO KEY UPDATE: a concurrent recording's observation insert takes KEY SHARE on this row and must not
        # wait for us while we wait for its episode lock.
        participant = Participant.objects.select_for_update(no_key=True).filter(pk=participant_id).first()
        if participant is None:
            return 0
        # observation_record rewrites an observation while holding its episode's lock; taking the same
        # locks (in id order) makes a recording in flight finish before, or start after, this retraction.
        list(
            Episode.objects.select_for_update()
            .filter(participant_id=participant_id)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        observations = Observation.objects.filter(participant_id=participant_id)
        counted = list(observations.filter(active=True).values_list("pk", "study_id", "agent_id", "y", "weight"))
        count = len(counted)
        LedgerChange.objects.bulk_create([
            LedgerChange(study_id=study_id, observation_id=pk, participant_id=participant_id, was_active=True,
                         old_agent_id=agent_id, old_y=y, old_weight=weight)
            for pk, study_id, agent_id, y, weight in counted
        ])
        observations.exclude(active=False, retraction_reason=marker).update(
            active=False, retraction_reason=marker, updated_at=timezone.now()
        )
        grades = GradeObservation.objects.filter(participant_id=participant_id)
        grade_count = grades.filter(active=True).count()
        grades.exclude(active=False, retraction_reason__in=(marker, SUPERSEDED)).update(
            active=False, retraction_reason=marker, updated_at=timezone.now()
        )
        if count or grade_count:
            audit_record(
                actor=None, action="observation.retract_participant", obj=participant,
                study=participant.study, after={"retracted": count, "grades_retracted": grade_count}, note=note,
            )
            study_id = participant.study_id
            transaction.on_commit(lambda: posterior_schedule_refresh(study_id=study_id))
    return count


def study_rerecord(*, study_id: int) -> int:
    """Record every scored episode of the study again (e.g. after a score-source switch); return the count.

    Each episode goes through :func:`observation_record` in its own transaction, so the refreshed
    posterior equals a batch solve of the resulting active ledger.
    """
    episode_ids = list(
        Episode.objects.filter(study_id=study_id)
        .filter(
            Q(auto_score__isnull=False)
            | Q(expert_score__isnull=False)
            | Q(score__isnull=False)
            | Q(observation__isnull=False)
        )
        .order_by("pk")
        .values_list("pk", flat=True)
        .distinct()
    )
    for episode_id in episode_ids:
        observation_record(episode_id=episode_id, schedule_refresh=False)
    if episode_ids:  # one refresh request for the whole pass, not one per debounce window it spans
        transaction.on_commit(lambda: posterior_schedule_refresh(study_id=study_id))
    return len(episode_ids)



"""Writes of the rating ledger (one observation per scored episode) and of posterior snapshots.

Why the stored rating is exact: the posterior depends only on the *set* of active observations (its
information form is a sum over them, paper Eq. 16-17), and every refresh solves that whole set from
scratch through the engine's exact Schur path. Recording therefore only has to keep the ledger right --
one row per episode, updated in place on a regrade, deactivated on exclusion -- and a refresh afterwards
equals a batch solve of the active ledger whatever the order, re-deliveries or regrades that led there.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.core.validators import validate_slug
from django.db import OperationalError, transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.text import slugify

from rating import selectors
from rating.analysis import connectivity
from rating.engine import SkillModel
from rating.exceptions import InvalidScore, SessionsImportError
from rating.models import EntityRating, Observation, RatingSnapshot
from studyapp.models import Agent, Episode, Participant, ParticipantIdentity, Study, TaskInstance
from studyapp.services.audit import audit_record

logger = logging.getLogger(__name__)

# Retraction reasons starting with this stay retracted when the episode is recorded again (see
# observations_retract_participant).
PARTICIPANT_RETRACTION = "participant retracted"
# ParticipantIdentity.platform of participants created from an imported sessions file.
IMPORT_PLATFORM = "collabskill-import"
EXCLUDED_PARTICIPANT_STATUSES = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)


def refresh_key(study_id: int) -> str:
    """Return the cache key that marks a pending debounced refresh of the study."""
    return f"rating:refresh:{study_id}"


# --------------------------------------------------------------------------------------------------------
# Recording one episode
# --------------------------------------------------------------------------------------------------------


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
    if episode.status == Episode.Status.SKIPPED:
        return "episode skipped"
    if episode.participant.status in EXCLUDED_PARTICIPANT_STATUSES:
        return f"participant {episode.participant.get_status_display().lower()}"
    if episode.is_gold:
        # Planted known-answer copies check experts; counting them would count one session twice.
        return "gold QA episode"
    if y is None:
        return "no score"
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


def observation_record(*, episode_id: int) -> Observation | None:
    """Bring the episode's score and its ledger observation up to date; return the observation.

    Locks the episode row, so concurrent deliveries for one episode run one after the other and the
    second sees the first's row (no duplicate, no lost update). Re-delivery with unchanged inputs writes
    nothing. A regrade rewrites y in place; an excluded episode (skipped, participant withdrawn, gold
    copy, no score) has its observation deactivated with the reason. Other statuses do not matter: while
    a regrade is in progress the previous score keeps counting until the new one is recorded. Returns
    ``None`` when the episode does not exist or never had a counted observation. A changed ledger
    schedules a debounced refresh.
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
        ledger_changed = False
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
        if ledger_changed:
            study_id = study.pk
            transaction.on_commit(lambda: posterior_schedule_refresh(study_id=study_id))
    return observation


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
        count = observations.filter(active=True).count()
        observations.exclude(active=False, retraction_reason=marker).update(
            active=False, retraction_reason=marker, updated_at=timezone.now()
        )
        if count:
            audit_record(
                actor=None, action="observation.retract_participant", obj=participant,
                study=participant.study, after={"retracted": count}, note=note,
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
        observation_record(episode_id=episode_id)
    return len(episode_ids)


# --------------------------------------------------------------------------------------------------------
# Refreshing the posterior
# --------------------------------------------------------------------------------------------------------


def posterior_schedule_refresh(*, study_id: int) -> bool:
    """Enqueue a refresh of the study unless one is already pending; return whether this call enqueued.

    Call it after the ledger change has committed (services use ``transaction.on_commit``). The first
    caller in a debounce window adds the cache key and enqueues ``refresh_posterior`` with a countdown of
    ``RATING["REFRESH_DEBOUNCE_SECONDS"]``; later callers find the key and stop. Nothing is lost: the
    refresh deletes the key *before* it reads the ledger, so a caller that found the key set had already
    committed and is read, and a caller arriving after the delete (or after the key expired) enqueues a
    refresh of its own.
    """
    debounce = float(settings.RATING["REFRESH_DEBOUNCE_SECONDS"])
    key = refresh_key(study_id)
    from rating.tasks import refresh_posterior  # the tasks module imports this one

    # A cache or broker outage must not fail the change that asked: the beat sweep refreshes every study
    # whose ledger is newer than its latest snapshot, so a lost request only delays the refresh.
    try:
        # Redis expires keys in whole seconds and treats a zero timeout as "do not store".
        if not cache.add(key, 1, timeout=max(1, math.ceil(debounce))):
            return False
        refresh_posterior.apply_async(args=[study_id], countdown=debounce)
    except Exception:
        logger.warning("could not schedule the refresh of study %s; the sweep will do it", study_id, exc_info=True)
        with contextlib.suppress(Exception):  # the cache may be down too; the key then expires on its own
            cache.delete(key)  # let the next change try again rather than wait for the key to expire
        return False
    return True


def _connectivity_summary(agent_labels: np.ndarray, human_idx: np.ndarray) -> dict[str, Any]:
    if agent_labels.shape[0] == 0:
        return {"connected": True, "n_components": 0, "agent_component": {}, "components": [], "warning": None}
    return connectivity(agent_labels, human_idx.astype(str)).to_dict()


def posterior_refresh(*, study_id: int) -> RatingSnapshot:
    """Solve the study's active ledger and store it as the next snapshot, atomically.

    The study row is locked for the duration, so concurrent refreshes of one study write consecutive
    versions. The ledger is read in one query; agents are labelled by name and humans by pseudonym, and
    each kind is ranked by the conservative score. ``computed_at`` is the moment the ledger was read.
    """
    started = time.perf_counter()
    with transaction.atomic():
        # NO KEY UPDATE serialises refreshes of the study without blocking recordings, whose inserts only take
        # KEY SHARE on the study row.
        study = Study.objects.select_for_update(no_key=True).get(pk=study_id)
        # Delete the debounce key before the read (see posterior_schedule_refresh for why that loses nothing).
        cache.delete(refresh_key(study_id))
        read_at = timezone.now()
        t0 = time.perf_counter()
        arrays = selectors.observations_arrays(study)
        t_read = time.perf_counter()
        config = selectors.study_rating_config(study)
        agent_keys, agent_idx = np.unique(arrays.agent_ids, return_inverse=True)
        human_keys, human_idx = np.unique(arrays.participant_ids, return_inverse=True)
        unit_weights = bool(np.all(arrays.w == 1.0))
        model = SkillModel.from_arrays(
            agent_idx.reshape(-1),
            human_idx.reshape(-1),
            arrays.y,
            None if unit_weights else arrays.w,
            agent_ids=[str(pk) for pk in agent_keys.tolist()],
            human_ids=[str(pk) for pk in human_keys.tolist()],
            config=config,
        )
        agent_rows = model.leaderboard("agent")
        human_rows = model.leaderboard("human")
        t_solve = time.perf_counter()
        names = selectors.agent_names(agent_keys)
        pseudonyms = selectors.participant_pseudonyms(study, human_keys)
        agent_labels = np.array([names.get(int(pk), f"agent {pk}") for pk in agent_keys.tolist()], dtype=object)
        links = _connectivity_summary(agent_labels[agent_idx.reshape(-1)], human_idx.reshape(-1))
        t_links = time.perf_counter()
        version = (RatingSnapshot.objects.filter(study=study).aggregate(v=Max("version"))["v"] or 0) + 1
        snapshot = RatingSnapshot.objects.create(
            study=study, version=version, n_observations=arrays.n, config=config.to_dict(), connectivity=links
        )
        ratings = []
        for kind, rows, labels in (
            (EntityRating.Kind.AGENT, agent_rows, names),
            (EntityRating.Kind.HUMAN, human_rows, pseudonyms),
        ):
            for row in rows:
                entity_id = int(row["entity_id"])
                ratings.append(
                    EntityRating(
                        snapshot_id=snapshot.pk,  # the id, not the instance: the descriptor costs ~40 us a row
                        entity_kind=kind,
                        entity_id=entity_id,
                        label=labels.get(entity_id, f"{kind} {entity_id}"),
                        mu=row["mu"],
                        sigma=row["sigma"],
                        conservative=row["conservative"],
                        n=row["n"],
                        rank=row["rank"],
                    )
                )
        EntityRating.objects.bulk_create(ratings, batch_size=5000)
        t_write = time.perf_counter()
        timings = {
            "read_ms": round((t_read - t0) * 1000, 3),
            "solve_ms": round((t_solve - t_read) * 1000, 3),
            "connectivity_ms": round((t_links - t_solve) * 1000, 3),
            "write_ms": round((t_write - t_links) * 1000, 3),
            "total_ms": round((t_write - started) * 1000, 3),
        }
        RatingSnapshot.objects.filter(pk=snapshot.pk).update(computed_at=read_at, timings=timings)
        snapshot.computed_at, snapshot.timings = read_at, timings
    return snapshot


def posteriors_refresh_stale() -> list[int]:
    """Refresh every study whose ledger or settings changed since its latest snapshot; return their ids.

    One study's failure is logged and does not stop the others; database errors propagate so the beat
    task retries the whole sweep.
    """
    refreshed = []
    for study_id in selectors.studies_needing_refresh():
        try:
            posterior_refresh(study_id=study_id)
        except (OperationalError, Study.DoesNotExist):
            raise
        except Exception:
            logger.exception("rating sweep: refreshing study %s failed", study_id)
            continue
        refreshed.append(study_id)
    return refreshed


# --------------------------------------------------------------------------------------------------------
# Importing released sessions
# --------------------------------------------------------------------------------------------------------


@dataclass
class SessionsImportResult:
    """What an import did, for the command's summary and the audit log."""

    sessions: int = 0
    counted: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    retracted: int = 0
    skipped: int = 0
    not_done: int = 0
    unscored: int = 0
    agents_created: int = 0
    participants_created: int = 0
    tasks_linked: int = 0
    tasks_unknown: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.retracted)


@dataclass(frozen=True)
class ParsedSession:
    external_id: str
    agent_name: str
    user_id: str
    task_uuid: uuid.UUID | None
    y: float | None
    ignored: str  # "", "skipped", "not_done" or "unscored"


def _text_id(value: Any) -> str | None:
    """Return a string or integer id as stripped text (booleans and other types are not ids)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text or None


def sessions_parse(sessions: Any) -> list[ParsedSession]:
    """Validate the released sessions format, collecting every problem; raise SessionsImportError if any."""
    if not isinstance(sessions, list):
        raise SessionsImportError([f"the file must hold a JSON list of sessions, not {type(sessions).__name__}"])
    problems: list[str] = []
    parsed: list[ParsedSession] = []
    seen: dict[str, int] = {}
    for index, record in enumerate(sessions):
        where = f"session #{index}"
        if not isinstance(record, dict):
            problems.append(f"{where}: expected an object, got {type(record).__name__}")
            continue
        raw_id = record.get("session_id")
        external_id = str(index) if raw_id is None else _text_id(raw_id)
        if external_id is None or len(external_id) > 128:
            problems.append(f"{where}: session_id must be a non-empty string or integer of at most 128 characters")
            continue
        where = f"session #{index} ({external_id})"
        if external_id in seen:
            problems.append(f"{where}: session_id repeats session #{seen[external_id]}")
            continue
        seen[external_id] = index
        agent_name = record.get("agent_id")
        if not isinstance(agent_name, str) or not agent_name.strip() or len(agent_name.strip()) > 100:
            problems.append(f"{where}: agent_id must be the agent's name (1-100 characters), got {agent_name!r}")
            continue
        user_id = _text_id(record.get("user_id"))
        if user_id is None or len(user_id) > 128:
            problems.append(f"{where}: user_id must be a non-empty string of at most 128 characters")
            continue
        task_uuid = None
        raw_task = record.get("task_id")
        if raw_task not in (None, ""):
            try:
                task_uuid = uuid.UUID(str(raw_task))
            except ValueError:
                problems.append(f"{where}: task_id must be a task UUID, got {raw_task!r}")
                continue
        skipped = record.get("skipped", False)
        if not isinstance(skipped, bool):
            problems.append(f"{where}: skipped must be true or false, got {skipped!r}")
            continue
        score = record.get("autograde_overall_score")
        if score is not None and (
            isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
        ):
            problems.append(f"{where}: autograde_overall_score must be a number or null, got {score!r}")
            continue
        if skipped:
            ignored = "skipped"
        elif record.get("autograde_status") != "done":
            ignored = "not_done"
        elif score is None:
            ignored = "unscored"
        else:
            ignored = ""
            if not 0 <= score <= 100:
                problems.append(f"{where}: autograde_overall_score {score!r} is outside 0-100")
                continue
        parsed.append(
            ParsedSession(
                external_id=external_id,
                agent_name=agent_name.strip(),
                user_id=user_id,
                task_uuid=task_uuid,
                y=None if score is None else float(score),
                ignored=ignored,
            )
        )
    if problems:
        raise SessionsImportError(problems)
    return parsed


def _unique_agent_slug(name: str, taken: set[str]) -> str:
    base = slugify(name)[:56] or "agent"
    slug, suffix = base, 2
    while slug in taken:
        slug, suffix = f"{base}-{suffix}", suffix + 1
    taken.add(slug)
    return slug


def sessions_import_study(*, slug: str, name: str = "", create: bool = False) -> tuple[Study, bool]:
    """Return ``(study, created)`` for the slug, creating a closed study (it recruits nobody) if ``create``.

    Raises ``Study.DoesNotExist`` when it is missing and ``create`` is false, ``ValidationError`` for a bad slug.
    """
    study = Study.objects.filter(slug=slug).first()
    if study is not None or not create:
        if study is None:
            raise Study.DoesNotExist(f"no study with slug {slug!r}")
        return study, False
    validate_slug(slug)
    study = Study.objects.create(name=name or slug, slug=slug, status=Study.Status.CLOSED)
    audit_record(actor=None, action="study.create", obj=study, study=study, note="created to import sessions")
    return study, True


def sessions_import(*, study_id: int, sessions: Any, actor: Any = None) -> SessionsImportResult:
    """Load sessions in the released CollabSkill format into the study's ledger, without episodes.

    Only sessions that are done, not skipped and scored count. Agents are matched by name (created when
    new), participants by ``user_id`` (kept in ParticipantIdentity with platform ``collabskill-import``;
    their pseudonyms are new), tasks by UUID when this database holds them; the UUID itself is always kept
    on the observation, so leave-one-task-out works on published data without its tasks. Observations are keyed
    by session id, so importing the same file again changes nothing, and a corrected file updates or
    retracts exactly the sessions that changed. The whole file is validated first; any problem means
    nothing is written (:class:`~rating.exceptions.SessionsImportError` lists them all).
    """
    parsed = sessions_parse(sessions)
    result = SessionsImportResult(sessions=len(parsed))
    with transaction.atomic():
        study = Study.objects.select_for_update(no_key=True).get(pk=study_id)
        counted = [s for s in parsed if not s.ignored]
        for session in parsed:
            if session.ignored:
                setattr(result, session.ignored, getattr(result, session.ignored) + 1)
        result.counted = len(counted)

        agents = {agent.name: agent for agent in Agent.objects.all()}
        taken_slugs = set(Agent.objects.values_list("slug", flat=True))
        for name in sorted({s.agent_name for s in counted} - agents.keys()):
            agents[name] = Agent.objects.create(name=name, slug=_unique_agent_slug(name, taken_slugs), is_active=False)
            result.agents_created += 1
        used_agents = [agents[name] for name in {s.agent_name for s in counted}]
        if used_agents:
            study.agents.add(*used_agents)

        participant_of = dict(
            ParticipantIdentity.objects.filter(study=study, platform=IMPORT_PLATFORM).values_list(
                "platform_worker_id", "participant_id"
            )
        )
        new_users = sorted({s.user_id for s in counted} - participant_of.keys())
        if new_users:
            created = Participant.objects.bulk_create(
                [Participant(study=study, status=Participant.Status.COMPLETE) for _ in new_users]
            )
            ParticipantIdentity.objects.bulk_create(
                [
                    ParticipantIdentity(
                        participant=participant, study=study, platform=IMPORT_PLATFORM, platform_worker_id=user_id
                    )
                    for participant, user_id in zip(created, new_users, strict=True)
                ]
            )
            participant_of.update({user_id: p.pk for user_id, p in zip(new_users, created, strict=True)})
            result.participants_created = len(new_users)

        task_uuids = {s.task_uuid for s in counted if s.task_uuid is not None}
        task_of = dict(TaskInstance.objects.filter(uuid__in=task_uuids).values_list("uuid", "pk")) if task_uuids else {}

        existing = {o.external_id: o for o in Observation.objects.filter(study=study).exclude(external_id="")}
        now = timezone.now()
        to_create: list[Observation] = []
        to_update: list[Observation] = []
        for session in parsed:
            observation = existing.get(session.external_id)
            if session.ignored:
                if observation is not None and observation.active:
                    observation.active = False
                    observation.retraction_reason = f"imported session {session.ignored.replace('_', ' ')}"
                    observation.updated_at = now
                    to_update.append(observation)
                    result.retracted += 1
                continue
            task_id = task_of.get(session.task_uuid) if session.task_uuid is not None else None
            if session.task_uuid is not None:
                if task_id is None:
                    result.tasks_unknown += 1
                else:
                    result.tasks_linked += 1
            wanted = {
                "agent_id": agents[session.agent_name].pk,
                "participant_id": participant_of[session.user_id],
                "task_id": task_id,
                "task_uuid": session.task_uuid,
                "y": session.y,
                "source": Observation.Source.IMPORTED,
                "active": True,
                "retraction_reason": "",
            }
            if observation is None:
                to_create.append(Observation(study=study, external_id=session.external_id, **wanted))
                result.created += 1
            elif any(getattr(observation, name) != value for name, value in wanted.items()):
                for name, value in wanted.items():
                    setattr(observation, name, value)
                observation.updated_at = now
                to_update.append(observation)
                result.updated += 1
            else:
                result.unchanged += 1
        Observation.objects.bulk_create(to_create, batch_size=1000)
        Observation.objects.bulk_update(
            to_update,
            ["agent", "participant", "task", "task_uuid", "y", "source", "active", "retraction_reason", "updated_at"],
            batch_size=1000,
        )
        if result.changed:
            audit_record(actor=actor, action="rating.sessions_import", obj=study, study=study, after=result.to_dict())
    return result

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
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from django.core.cache import cache
from django.core.validators import validate_slug
from django.db import OperationalError, connection, transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.text import slugify

from rating import selectors
from rating.analysis import connectivity
from rating.conf import rating_settings
from rating.engine import first_appearance
from rating.exceptions import InvalidScore, SessionsImportError
from rating.fit import ModelSpec
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
        if ledger_changed and schedule_refresh:
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
        observation_record(episode_id=episode_id, schedule_refresh=False)
    if episode_ids:  # one refresh request for the whole pass, not one per debounce window it spans
        transaction.on_commit(lambda: posterior_schedule_refresh(study_id=study_id))
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
    debounce = float(rating_settings()["REFRESH_DEBOUNCE_SECONDS"])
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


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Return the sorted distinct values: :func:`numpy.unique` by a sort, not by its hash table.

    numpy's hash-based unique measured several seconds per call on 10^7 mostly distinct int64 keys, a sort
    well under one.
    """
    ordered = np.sort(values)
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _connectivity_summary(agent_codes: np.ndarray, agent_labels: np.ndarray, human_codes: np.ndarray) -> dict[str, Any]:
    """Return rating.analysis.connectivity of the ledger, computed on a reduced graph of the same components.

    ``human_codes`` are any non-negative integers, one per person (not necessarily consecutive). Each person
    links every agent they worked with to the lowest-coded one of them (a star per person: the same components
    as the full graph), and every distinct agent-agent link becomes one synthetic participant; each agent also
    gets one of its own, so an agent without links still appears, and agents keep their order. Ten million
    observations shrink to at most agents² links, found with two vectorised passes and no sort, before the
    string-id graph is built.
    """
    if agent_codes.shape[0] == 0:
        return {"connected": True, "n_components": 0, "agent_component": {}, "components": [], "warning": None}
    n_agents = int(agent_labels.shape[0])
    small = np.int32 if n_agents < 2**31 - 1 else np.int64
    codes: np.ndarray = np.asarray(agent_codes).astype(small, copy=False)
    humans = np.asarray(human_codes).astype(np.intp, copy=False)
    lowest = np.full(int(humans.max()) + 1, n_agents, dtype=small)
    np.minimum.at(lowest, humans, codes)
    pairs = np.take(lowest, humans).astype(np.int64) * n_agents + codes
    if n_agents * n_agents <= 1 << 26:  # a bitmap of every possible link: no sort of the 10^7 pairs
        seen = np.zeros(n_agents * n_agents, dtype=bool)
        seen[pairs] = True
        links = np.flatnonzero(seen)
    else:
        links = _sorted_unique(pairs)
    left, right = np.divmod(links, n_agents)
    left, right = left[left != right], right[left != right]
    own, linked = np.arange(n_agents), n_agents + np.arange(left.shape[0])
    agents = np.concatenate([own, left, right])
    people = np.concatenate([own, linked, linked])
    return connectivity(agent_labels[agents], people).to_dict()


def _compact_codes(keys: np.ndarray) -> np.ndarray:
    """Return non-negative integer codes for ``keys`` (equal keys, equal codes): the key itself, less the
    smallest, when the keys span a compact range (primary keys usually do), else numbered by first appearance."""
    values = np.asarray(keys).astype(np.int64, copy=False)
    low, high = int(values.min()), int(values.max())
    if high - low < 4 * values.shape[0] + (1 << 16):
        return values - low
    return first_appearance(values.view(np.uint64).reshape(-1, 1))[0]


def _key_positions(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return each value's position in ``keys`` (distinct, every value among them): a lookup table when the
    keys span a compact range, else a binary search."""
    keys = np.asarray(keys).astype(np.int64, copy=False)
    values = np.asarray(values).astype(np.int64, copy=False)
    low, high = int(keys.min()), int(keys.max())
    if high - low < 4 * keys.shape[0] + (1 << 16):
        table = np.zeros(high - low + 1, dtype=np.intp)
        table[keys - low] = np.arange(keys.shape[0])
        return table[values - low]
    sorter = np.argsort(keys)
    return sorter[np.searchsorted(keys, values, sorter=sorter)]


def _ranks(conservative: np.ndarray, mu: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Return 1-based ranks by conservative score, ties to higher mu, then to the lower primary key."""
    order = np.lexsort((keys, -mu, -conservative))
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[order] = np.arange(1, order.size + 1)
    return ranks


_COPY_CHUNK_ROWS = 100_000
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str) -> str:
    """Escape a value for PostgreSQL's COPY text format (backslash, tab, newline, carriage return)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def _entity_ratings_write(
    *,
    snapshot_id: int,
    kind: str,
    keys: np.ndarray,
    labels: list[str],
    mu: np.ndarray,
    sigma: np.ndarray,
    conservative: np.ndarray,
    n: np.ndarray,
) -> None:
    """Write one kind's rows of a snapshot: PostgreSQL ``COPY FROM STDIN``, elsewhere ``bulk_create``.

    A million humans are a few seconds through COPY, against minutes of row-by-row ORM work.
    """
    if keys.size == 0:
        return
    ranks = _ranks(np.asarray(conservative), np.asarray(mu), keys)
    columns = zip(
        keys.tolist(), labels, np.asarray(mu, float).tolist(), np.asarray(sigma, float).tolist(),
        np.asarray(conservative, float).tolist(), np.asarray(n).astype(np.int64).tolist(), ranks.tolist(),
        strict=True,
    )
    if connection.vendor == "postgresql":
        table = EntityRating._meta.db_table
        sql = (
            f"COPY {table} (snapshot_id, entity_kind, entity_id, label, mu, sigma, conservative, n, rank) "
            "FROM STDIN"
        )
        values = np.concatenate([np.asarray(a, float) for a in (mu, sigma, conservative)])
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            if not np.all(np.isfinite(values)):  # psycopg spells nan/inf the way PostgreSQL reads them
                for entity_id, label, m, s, c, count, rank in columns:
                    copy.write_row((snapshot_id, kind, entity_id, label, m, s, c, count, rank))
                return
            # The text format, built in bulk: per-row write_row adapts every value and was most of the write
            # at 10^6 rows. Floats are written as repr (the shortest exact round trip, as psycopg writes them).
            prefix = f"{int(snapshot_id)}\t{_copy_text(str(kind))}\t"
            chunk: list[str] = []
            for entity_id, label, m, s, c, count, rank in columns:
                chunk.append(f"{prefix}{entity_id}\t{_copy_text(label)}\t{m!r}\t{s!r}\t{c!r}\t{count}\t{rank}\n")
                if len(chunk) == _COPY_CHUNK_ROWS:
                    copy.write("".join(chunk))
                    chunk = []
            if chunk:
                copy.write("".join(chunk))
        return
    EntityRating.objects.bulk_create(
        [
            EntityRating(
                snapshot_id=snapshot_id, entity_kind=kind, entity_id=entity_id, label=label, mu=m, sigma=s,
                conservative=c, n=count, rank=rank,
            )
            for entity_id, label, m, s, c, count, rank in columns
        ],
        batch_size=5000,
    )


def posterior_refresh(*, study_id: int, only_if_changed: bool = False) -> RatingSnapshot:
    """Solve the study's active ledger and store it as the next snapshot, atomically.

    The study row is locked for the duration, so concurrent refreshes of one study write consecutive
    versions. The ledger is read in one query; agents are labelled by name and humans by pseudonym, and
    each kind is ranked by the conservative score. ``computed_at`` is the moment the ledger was read.
    With ``only_if_changed`` (refresh requests: the debounced task, the demo) a ledger and model settings
    identical to the latest snapshot's return that snapshot instead of writing a copy of it.
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
        digest = arrays.digest(selectors.study_model_spec(study).to_dict())
        if only_if_changed:
            latest = selectors.latest_snapshot(study)
            if latest is not None and latest.ledger_digest == digest:
                return latest
        if arrays.n == 0:  # an emptied ledger is an empty snapshot, not an error
            spec = selectors.study_model_spec(study)
            version = (RatingSnapshot.objects.filter(study=study).aggregate(v=Max("version"))["v"] or 0) + 1
            snapshot = RatingSnapshot.objects.create(
                study=study, version=version, n_observations=0, config=spec.to_dict(), fit={}, ledger_digest=digest,
                connectivity=_connectivity_summary(
                    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
                ),
                timings={"total_ms": round((time.perf_counter() - started) * 1000, 3)},
            )
            RatingSnapshot.objects.filter(pk=snapshot.pk).update(computed_at=read_at)
            snapshot.computed_at = read_at
            return snapshot
        fit = selectors.study_fit(study, arrays)
        t_solve = time.perf_counter()
        agent_keys = fit.agent_ids.astype(np.int64)
        human_keys = fit.human_ids.astype(np.int64)
        names = selectors.agent_names(agent_keys)
        pseudonyms = selectors.participant_pseudonyms(study, human_keys)
        agent_labels = np.array([names.get(int(pk), f"agent {pk}") for pk in agent_keys.tolist()], dtype=object)
        # Any consistent numbering of the participants will do for the links (no sort of 10^7 keys).
        human_idx = _compact_codes(arrays.participant_ids)
        links = _connectivity_summary(_key_positions(agent_keys, arrays.agent_ids), agent_labels, human_idx)
        t_links = time.perf_counter()
        version = (RatingSnapshot.objects.filter(study=study).aggregate(v=Max("version"))["v"] or 0) + 1
        snapshot = RatingSnapshot.objects.create(
            study=study, version=version, n_observations=arrays.n, config=fit.spec.to_dict(),
            fit=fit.to_dict(), connectivity=links, ledger_digest=digest,
        )
        k = fit.spec.k
        agent_sigma = fit.agent_sigma()
        human_cons = fit.human_mu - k * fit.human_sigma
        _entity_ratings_write(
            snapshot_id=snapshot.pk,
            kind=EntityRating.Kind.AGENT,
            keys=agent_keys,
            labels=[names.get(int(pk), f"agent {pk}") for pk in agent_keys.tolist()],
            mu=fit.agent_mu,
            sigma=agent_sigma,
            conservative=fit.conservative(),
            n=fit.agent_n,
        )
        _entity_ratings_write(
            snapshot_id=snapshot.pk,
            kind=EntityRating.Kind.HUMAN,
            keys=human_keys,
            labels=[pseudonyms.get(int(pk), f"human {pk}") for pk in human_keys.tolist()],
            mu=fit.human_mu,
            sigma=fit.human_sigma,
            conservative=human_cons,
            n=fit.human_n,
        )
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
    no_agent: int = 0
    no_user: int = 0
    agents_created: int = 0
    participants_created: int = 0
    tasks_linked: int = 0
    tasks_unknown: int = 0
    model: str = ""
    model_changed: bool = False
    # Session ids left out because they name no agent or no user (the reference loader skips them too).
    left_out_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.retracted or self.model_changed)


# Which field of a session record holds y, by what the score is (sessions.json names it, see studyapp.exports).
SCORE_FIELDS = {"auto": "autograde_overall_score", "expert": "expert_overall_score", "blended": "blended_overall_score"}
# The first record of an exported sessions.json: the study's rating model and score source. It is marked
# skipped and not done, so loaders of the released format pass over it.
HEADER_RECORD_TYPE = "study_config"


@dataclass(frozen=True)
class ParsedSession:
    external_id: str
    agent_name: str
    user_id: str
    task_uuid: uuid.UUID | None
    y: float | None
    ignored: str  # "", "skipped", "not_done", "unscored", "no_agent" or "no_user"
    score_kind: str = "auto"


def _text_id(value: Any) -> str | None:
    """Return a string or integer id as stripped text (booleans and other types are not ids)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text or None


def _is_header(record: Any) -> bool:
    return isinstance(record, dict) and record.get("record_type") == HEADER_RECORD_TYPE


def sessions_header(sessions: Any) -> dict[str, Any] | None:
    """Return the exported file's study-config record (rating model, score source), or ``None``."""
    if isinstance(sessions, list) and sessions and _is_header(sessions[0]):
        return sessions[0]
    return None


def sessions_model(sessions: Any) -> ModelSpec | None:
    """Return the rating model the exported file carries, ``None`` for a file in the plain released format.

    Raises :class:`SessionsImportError` when the header's model is not a valid model description.
    """
    header = sessions_header(sessions)
    if header is None or header.get("rating_model") is None:
        return None
    try:
        return ModelSpec.from_dict(header["rating_model"])
    except (TypeError, ValueError) as exc:
        raise SessionsImportError([f"study_config record: rating_model is not valid: {exc}"])


def _score_value(raw: Any) -> float | None | str:
    """Return the score as a float (numbers and numeric strings), None when absent, or a problem text."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool):
        return f"must be a number, got {raw!r}"
    if isinstance(raw, str):
        try:
            raw = float(raw.strip())
        except ValueError:
            return f"must be a number or a numeric string, got {raw!r}"
    if not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return f"must be a finite number, got {raw!r}"
    return float(raw)


def sessions_parse(sessions: Any) -> list[ParsedSession]:
    """Validate the released sessions format, collecting every problem; raise SessionsImportError if any.

    Lenient where the reference loader is: a session that is done but names no agent or no user is left
    out (and reported by the import, ``ignored`` = ``no_agent`` / ``no_user``), and a numeric string score
    is read as a number. The score is read from the field the record's ``score_source`` names
    (``expert_overall_score``, ``blended_overall_score``), else from ``autograde_overall_score``. A leading
    ``study_config`` record (written by this platform's export) is not a session.
    """
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
        if _is_header(record):
            if index:
                problems.append(f"{where}: a study_config record may only come first")
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
        skipped = record.get("skipped", False)
        if not isinstance(skipped, bool):
            problems.append(f"{where}: skipped must be true or false, got {skipped!r}")
            continue
        score_kind = record.get("score_source", "auto")
        if score_kind not in SCORE_FIELDS:
            problems.append(f"{where}: score_source must be one of {', '.join(SCORE_FIELDS)}, got {score_kind!r}")
            continue
        score_field = SCORE_FIELDS[score_kind]
        counted = not skipped and record.get("autograde_status") == "done"
        score = _score_value(record.get(score_field))
        if isinstance(score, str):
            if counted:
                problems.append(f"{where}: {score_field} {score}")
                continue
            score = None  # the reference loader never reads the score of a session it does not count
        raw_agent, raw_user = record.get("agent_id"), record.get("user_id")
        agent_name = _text_id(raw_agent) or ""
        user_id = _text_id(raw_user) or ""
        if counted and (len(agent_name) > 100 or (not agent_name and raw_agent not in (None, ""))):
            problems.append(f"{where}: agent_id must be the agent's name (at most 100 characters), got {raw_agent!r}")
            continue
        if counted and (len(user_id) > 128 or (not user_id and raw_user not in (None, ""))):
            problems.append(f"{where}: user_id must be a string or integer id of at most 128 characters")
            continue
        task_uuid = None
        raw_task = record.get("task_id")
        if raw_task not in (None, ""):
            try:
                task_uuid = uuid.UUID(str(raw_task))
            except ValueError:
                problems.append(f"{where}: task_id must be a task UUID, got {raw_task!r}")
                continue
        if skipped:
            ignored = "skipped"
        elif record.get("autograde_status") != "done":
            ignored = "not_done"
        elif score is None:
            ignored = "unscored"
        elif not agent_name:
            ignored = "no_agent"
        elif not user_id:
            ignored = "no_user"
        else:
            ignored = ""
            if not 0 <= score <= 100:
                problems.append(f"{where}: {score_field} {score!r} is outside 0-100")
                continue
        parsed.append(
            ParsedSession(
                external_id=external_id,
                agent_name=agent_name,
                user_id=user_id,
                task_uuid=task_uuid,
                y=score,
                ignored=ignored,
                score_kind=score_kind,
            )
        )
    if problems:
        raise SessionsImportError(problems)
    return parsed


def study_rating_model_set(*, study: Study, spec: ModelSpec, actor: Any = None, note: str = "") -> bool:
    """Give the study this rating model (kind, k, paper hyperparameters, hyper-uncertainty); audited.

    Returns whether anything changed. The next refresh (and the stale sweep) recomputes the posterior.
    """
    wanted = {
        "rating_model": spec.kind,
        "rating_k": spec.k,
        "rating_mu0": spec.paper.mu0,
        "rating_sigma0": spec.paper.sigma0,
        "rating_beta": spec.paper.beta,
        "rating_integrate_hyper": spec.integrate_hyper,
    }
    before = {name: getattr(study, name) for name in wanted}
    if before == wanted:
        return False
    for name, value in wanted.items():
        setattr(study, name, value)
    study.save(update_fields=[*wanted, "updated_at"])
    audit_record(actor=actor, action="study.rating_model", obj=study, study=study, before=before, after=wanted,
                 note=note)
    return True


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


def sessions_import(
    *, study_id: int, sessions: Any, actor: Any = None, model: ModelSpec | None = None
) -> SessionsImportResult:
    """Load sessions in the released CollabSkill format into the study's ledger, without episodes.

    Only sessions that are done, not skipped and scored count. Agents are matched by name (created when
    new), participants by ``user_id`` (kept in ParticipantIdentity with platform ``collabskill-import``;
    their pseudonyms are new), tasks by UUID when this database holds them; the UUID itself is always kept
    on the observation, so leave-one-task-out works on published data without its tasks. Observations are keyed
    by session id, so importing the same file again changes nothing, and a corrected file updates or
    retracts exactly the sessions that changed. The whole file is validated first; any problem means
    nothing is written (:class:`~rating.exceptions.SessionsImportError` lists them all).

    The rating model comes from ``model`` when given, else from the file's ``study_config`` record (an
    export of this platform carries it), else the study keeps its own -- so exporting a study and importing
    its sessions.json rates with exactly the same model. Each observation records which score it holds
    (auto, expert or blended) as its source.
    """
    parsed = sessions_parse(sessions)
    model = model if model is not None else sessions_model(sessions)
    result = SessionsImportResult(sessions=len(parsed))
    with transaction.atomic():
        study = Study.objects.select_for_update(no_key=True).get(pk=study_id)
        if model is not None:
            result.model_changed = study_rating_model_set(
                study=study, spec=model, actor=actor, note="rating model of an imported sessions file"
            )
        result.model = study.rating_model
        counted = [s for s in parsed if not s.ignored]
        for session in parsed:
            if session.ignored:
                setattr(result, session.ignored, getattr(result, session.ignored) + 1)
            if session.ignored in ("no_agent", "no_user"):
                result.left_out_ids.append(session.external_id)
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
                "source": session.score_kind,
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

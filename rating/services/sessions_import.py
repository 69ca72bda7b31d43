"""Importing released CollabSkill sessions (``sessions.json``) into a study's rating ledger."""

from __future__ import annotations

import math
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from rating.exceptions import SessionsImportError
from rating.fit import ModelSpec
from rating.models import Observation, PosteriorState
from rating.services.refresh import study_rating_model_set
from studies.model_families import family_from_name
from studies.models import Agent, Participant, ParticipantIdentity, Study, TaskInstance
from studies.services.audit import audit_record

# ParticipantIdentity.platform of participants created from an imported sessions file.
IMPORT_PLATFORM = "collabskill-import"

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


# Which field of a session record holds y, by what the score is (sessions.json names it, see console.exports).
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
    model = header["rating_model"]
    if isinstance(model, dict) and model.get("kind") == "judge_aware":
        raise SessionsImportError([
            "study_config record: the study was rated with the judge-aware model, which is fitted to every "
            "grade of a session; a sessions file holds one score per session. Import it with --model calibrated "
            "(the grades themselves are in the export's grades.csv)."])
    try:
        return ModelSpec.from_dict(model)
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


def _import_agents(study: Study, counted: list[ParsedSession], result: SessionsImportResult) -> dict[str, Agent]:
    """Return the agents of the counted sessions by name, creating the new ones (inactive) and adding all to the
    study."""
    agents = {agent.name: agent for agent in Agent.objects.all()}
    taken_slugs = set(Agent.objects.values_list("slug", flat=True))
    for name in sorted({s.agent_name for s in counted} - agents.keys()):
        agents[name] = Agent.objects.create(name=name, slug=_unique_agent_slug(name, taken_slugs), is_active=False,
                                            family=family_from_name(name))
        result.agents_created += 1
    used_agents = [agents[name] for name in {s.agent_name for s in counted}]
    if used_agents:
        study.agents.add(*used_agents)
    return agents


def _import_participants(study: Study, counted: list[ParsedSession], result: SessionsImportResult) -> dict[str, int]:
    """Return ``{user_id: participant pk}`` of the counted sessions, creating a participant per new user."""
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
    return participant_of


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

        agents = _import_agents(study, counted, result)
        participant_of = _import_participants(study, counted, result)

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
            # Bulk writes log no per-observation changes: the next refresh refits instead of updating.
            PosteriorState.objects.filter(study=study).update(live=False)
            audit_record(actor=actor, action="rating.sessions_import", obj=study, study=study, after=result.to_dict())
    return result

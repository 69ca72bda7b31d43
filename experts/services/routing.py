"""Route episodes to expert graders: domain match, load balance, double grading, gold checks, adjudication.

Routing rules:

- An episode is routable once it is graded, or earlier when grading flagged it for expert review
  (``needs_expert_review``, which includes episodes the enforced expert gate holds; those go first), then
  the calibration sample (``in_calibration_sample``, drawn at random when judges scored it), then the rest.
  Gold copies, skipped episodes and episodes of withdrawn participants are never routed.
- The primary grader is the active expert working in the task's sector with the fewest open assignments
  (ties: fewest assignments ever, then the longest-standing profile). An expert never grades their own work.
- A second, independent grader is added with probability ``study.double_grading_share``. The draw is
  seeded by the episode id, so re-running the router gives the same decision and the share is met across
  episodes rather than per call.
- Nobody is assigned the same episode twice (also a database constraint).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.files import File
from django.db import transaction
from django.db.models import Count, Max, Q, QuerySet

from experts.exceptions import NoGradingRubric, RoutingError
from experts.metrics import FAIL, PASS
from experts.models import ExpertAssignment, ExpertGrade, ExpertProfile
from grading.models import Extraction
from grading.selectors import rubric_for_grading
from studies.models import Episode, EpisodeFile, Participant, Study
from studies.services.audit import audit_record

OPEN = (ExpertAssignment.Status.ASSIGNED, ExpertAssignment.Status.IN_PROGRESS)
LIVE = (*OPEN, ExpertAssignment.Status.SUBMITTED)
GRADER_ROLES = (ExpertAssignment.Role.PRIMARY, ExpertAssignment.Role.SECOND)
GOLD_PSEUDONYM_PREFIX = "GOLD-"
EXCLUDED_PARTICIPANTS = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)


def routable_episodes(study: Study | None = None) -> QuerySet[Episode]:
    """Episodes waiting for a primary expert grade: flagged ones first, then the calibration sample.

    Simulated episodes have no deliverables to look at, so they never reach an expert.
    """
    ready = Q(status=Episode.Status.GRADED) | Q(
        needs_expert_review=True,
        status__in=[Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED])
    routed = Q(expert_assignments__role=ExpertAssignment.Role.PRIMARY, expert_assignments__status__in=LIVE)
    qs = (Episode.objects.filter(ready, is_gold=False, is_simulated=False)
          .exclude(participant__status__in=EXCLUDED_PARTICIPANTS)
          .exclude(pk__in=Episode.objects.filter(routed).values("pk")))
    if study is not None:
        qs = qs.filter(study=study)
    return qs.order_by("-needs_expert_review", "-in_calibration_sample", "submitted_at", "pk")


def experts_by_load(*, sector_id: int, exclude_profiles: Iterable[int] = (),
                    exclude_user_id: int | None = None) -> QuerySet[ExpertProfile]:
    """Active experts of a sector, least loaded first."""
    qs = (ExpertProfile.objects.filter(is_active=True, user__is_active=True, sectors=sector_id)
          .exclude(pk__in=list(exclude_profiles))
          .annotate(open_count=Count("assignments", filter=Q(assignments__status__in=OPEN), distinct=True),
                    total_count=Count("assignments", distinct=True))
          .order_by("open_count", "total_count", "pk"))
    if exclude_user_id is not None:
        qs = qs.exclude(user_id=exclude_user_id)
    return qs


def wants_second_grade(*, share: float, episode_id: int) -> bool:
    """Return the reproducible double-grading draw for an episode (same answer on every call)."""
    if share <= 0:
        return False
    if share >= 1:
        return True
    return random.Random(f"double-grading:{episode_id}").random() < share


def _assign(episode: Episode, expert: ExpertProfile, role: str, actor: Any) -> ExpertAssignment:
    return ExpertAssignment.objects.create(episode=episode, expert=expert, role=role,
                                           assigned_by=actor if getattr(actor, "is_authenticated", False) else None)


def episode_route(*, episode: Episode, actor: Any = None) -> list[ExpertAssignment]:
    """Give the episode a primary grader (and a second one when drawn); return the new assignments.

    Safe to call again: an episode that already has its graders gets nothing new. Returns an empty list
    when no expert works in the task's sector (the episode stays in the routing backlog).
    """
    created: list[ExpertAssignment] = []
    with transaction.atomic():
        locked = (Episode.objects.select_for_update(of=("self",)).select_related("study", "task", "participant")
                  .get(pk=episode.pk))
        if locked.is_gold or locked.participant.status in EXCLUDED_PARTICIPANTS:
            return created
        live = list(locked.expert_assignments.filter(status__in=LIVE))
        taken = {a.expert_id for a in locked.expert_assignments.all()}
        roles = {a.role for a in live}
        wanted = []
        if ExpertAssignment.Role.PRIMARY not in roles:
            wanted.append(ExpertAssignment.Role.PRIMARY)
        if ExpertAssignment.Role.SECOND not in roles and wants_second_grade(
                share=locked.study.double_grading_share, episode_id=locked.pk):
            wanted.append(ExpertAssignment.Role.SECOND)
        for role in wanted:
            expert = experts_by_load(sector_id=locked.task.sector_id, exclude_profiles=taken,
                                     exclude_user_id=locked.participant.user_id).first()
            if expert is None:
                break
            created.append(_assign(locked, expert, role, actor))
            taken.add(expert.pk)
        if created:
            audit_record(actor=actor, action="episode.expert_route", obj=locked, study=locked.study,
                         after={"assignments": [{"expert": a.expert_id, "role": a.role} for a in created]})
    return created


ASSIGNABLE_STATUSES = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED,
                       Episode.Status.FAILED)


def episode_assign_expert(*, episode: Episode, expert: ExpertProfile, actor: Any) -> ExpertAssignment:
    """Staff hand one submitted episode to a chosen expert, whatever its grading state or the expert's sectors.

    This is the manual path beside automatic routing (which waits for LLM grading): the expert gets the
    primary grade when the episode has none live, otherwise a second, independent grade.
    """
    with transaction.atomic():
        locked = (Episode.objects.select_for_update(of=("self",)).select_related("study", "participant")
                  .get(pk=episode.pk))
        if locked.is_simulated:
            raise RoutingError("Simulated episodes have no deliverables to grade; choose a submitted real episode.")
        if locked.is_gold:
            raise RoutingError("Gold copies are sent to experts from the gold-check page.")
        if locked.status not in ASSIGNABLE_STATUSES:
            raise RoutingError("Only submitted episodes can be graded; this one is "
                               f"{locked.get_status_display().lower()}.")
        if locked.participant.status in EXCLUDED_PARTICIPANTS:
            raise RoutingError("The participant withdrew, so their work is not graded any more.")
        if not expert.is_active or not expert.user.is_active:
            raise RoutingError(f"{expert.user.get_username()} is not an active expert.")
        if locked.participant.user_id is not None and expert.user_id == locked.participant.user_id:
            raise RoutingError("An expert never grades their own work.")
        if locked.expert_assignments.filter(expert=expert).exists():
            raise RoutingError(f"{expert.user.get_username()} already has this episode.")
        has_primary = locked.expert_assignments.filter(role=ExpertAssignment.Role.PRIMARY, status__in=LIVE).exists()
        role = ExpertAssignment.Role.SECOND if has_primary else ExpertAssignment.Role.PRIMARY
        assignment = _assign(locked, expert, role, actor)
        audit_record(actor=actor, action="episode.expert_assign", obj=locked, study=locked.study,
                     after={"expert": expert.pk, "role": role, "assignment": assignment.pk})
    return assignment


@dataclass
class RoutingReport:
    episodes_routed: int = 0
    assignments: int = 0
    without_expert: list[int] = field(default_factory=list)


def episodes_route_pending(*, study: Study | None = None, actor: Any = None, limit: int = 1000) -> RoutingReport:
    """Route every waiting episode (each in its own transaction); return what happened."""
    report = RoutingReport()
    for episode in list(routable_episodes(study)[:limit]):
        created = episode_route(episode=episode, actor=actor)
        if any(a.role == ExpertAssignment.Role.PRIMARY for a in created):
            report.episodes_routed += 1
        elif not episode.expert_assignments.filter(role=ExpertAssignment.Role.PRIMARY, status__in=LIVE).exists():
            report.without_expert.append(episode.pk)
        report.assignments += len(created)
    return report


def assignment_cancel(*, assignment: ExpertAssignment, actor: Any, reason: str = "") -> ExpertAssignment:
    """Withdraw an open assignment (e.g. an expert is away); a primary goes back to the routing backlog."""
    with transaction.atomic():
        locked = ExpertAssignment.objects.select_for_update().select_related("episode").get(pk=assignment.pk)
        if locked.status not in OPEN:
            raise RoutingError("Only open assignments can be withdrawn; submitted grades stay on record.")
        before = locked.status
        locked.status = ExpertAssignment.Status.CANCELLED
        locked.save(update_fields=["status"])
        audit_record(actor=actor, action="expert_assignment.cancel", obj=locked, study=locked.episode.study,
                     before={"status": before}, after={"status": locked.status}, note=reason)
    return locked


def study_set_double_grading_share(*, study: Study, share: float, actor: Any) -> Study:
    """Change the share of episodes graded by two experts (affects episodes routed from now on)."""
    if not 0.0 <= share <= 1.0:
        raise RoutingError("The double-grading share must be between 0 and 1 (e.g. 0.2 for one in five).")
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        before = locked.double_grading_share
        locked.double_grading_share = share
        locked.save(update_fields=["double_grading_share", "updated_at"])
        audit_record(actor=actor, action="study.double_grading_share", obj=locked, study=locked,
                     before={"double_grading_share": before}, after={"double_grading_share": share})
    return locked


# --------------------------------------------------------------------------------------------------------
# Gold (known-answer) episodes
# --------------------------------------------------------------------------------------------------------


def _gold_participant(study: Study) -> Participant:
    """The study's holder of gold copies: no account, never recruited, so it never appears as a worker."""
    holder = (Participant.objects.filter(study=study, user=None, pseudonym__startswith=GOLD_PSEUDONYM_PREFIX)
              .order_by("pk").first())
    if holder is None:
        holder = Participant.objects.create(study=study, user=None, status=Participant.Status.INVITED,
                                            pseudonym=GOLD_PSEUDONYM_PREFIX + secrets.token_hex(5).upper())
    return holder


def _copy_episode(source: Episode, holder: Participant) -> Episode:
    position = (holder.episodes.aggregate(p=Max("position"))["p"] or 0) + 1
    copy = Episode.objects.create(
        participant=holder, study=source.study, agent=source.agent, condition=source.condition, task=source.task,
        position=position,
        status=Episode.Status.GRADED, prior_experience=source.prior_experience, started_at=source.started_at,
        submitted_at=source.submitted_at, auto_score=source.auto_score, is_gold=True)
    for original in source.files.filter(kind=EpisodeFile.Kind.DELIVERABLE).order_by("name"):
        duplicate = EpisodeFile(episode=copy, kind=original.kind, name=original.name, size=original.size,
                                sha256=original.sha256, content_type=original.content_type)
        with original.file.open("rb") as handle:
            duplicate.file.save(original.name, File(handle), save=False)
        duplicate.save()
    extraction = Extraction.objects.filter(episode=source).first()
    if extraction is not None:
        Extraction.objects.create(episode=copy, content=extraction.content, total_chars=extraction.total_chars,
                                  truncated=extraction.truncated)
    return copy


def gold_plant(*, source: Episode, answers: Mapping[str, str], experts: Iterable[ExpertProfile],
               actor: Any) -> Episode:
    """Plant a known-answer copy of ``source`` in the chosen experts' queues; return the copy.

    ``answers`` maps criterion keys of the task's grading rubric to ``pass``/``fail``. The copy looks like
    any other episode in the queue (role ``gold`` is never shown to experts), is excluded from the rating,
    and each expert's grade is pinned to the rubric the answers refer to.
    """
    rubric = rubric_for_grading(source.task)
    if rubric is None:
        raise NoGradingRubric("This task has no rubric yet, so there is nothing to give known answers for.")
    keys = set(rubric.criteria.values_list("key", flat=True))
    clean = {str(k): str(v) for k, v in answers.items() if v}
    unknown = sorted(set(clean) - keys)
    if unknown:
        raise RoutingError(f"Unknown criteria in the answer key: {', '.join(unknown)}.")
    if any(v not in (PASS, FAIL) for v in clean.values()):
        raise RoutingError("Known answers must be pass or fail.")
    if not clean:
        raise RoutingError("Give the known answer (pass or fail) for at least one criterion.")
    chosen = list(experts)
    if not chosen:
        raise RoutingError("Choose at least one expert to receive the gold episode.")
    if source.is_gold:
        raise RoutingError("That episode is itself a gold copy; plant from the original episode.")
    graded_source = set(source.expert_assignments.values_list("expert_id", flat=True))
    for expert in chosen:
        if not expert.is_active or not expert.sectors.filter(pk=source.task.sector_id).exists():
            raise RoutingError(f"{expert.user} does not work in this task's sector.")
        if expert.pk in graded_source:
            raise RoutingError(f"{expert.user} has already seen the original episode, so the check would not "
                               "be blind.")
    with transaction.atomic():
        copy = _copy_episode(source, _gold_participant(source.study))
        copy.gold_verdicts = clean
        copy.save(update_fields=["gold_verdicts", "updated_at"])
        for expert in chosen:
            assignment = _assign(copy, expert, ExpertAssignment.Role.GOLD, actor)
            ExpertGrade.objects.create(assignment=assignment, episode=copy, expert=expert, rubric=rubric)
        audit_record(actor=actor, action="episode.gold_plant", obj=copy, study=source.study,
                     after={"source": source.pk, "rubric": rubric.pk, "answers": clean,
                            "experts": [e.pk for e in chosen]})
    return copy


# --------------------------------------------------------------------------------------------------------
# Adjudication and re-attempts
# --------------------------------------------------------------------------------------------------------


def _submitted_grades(episode: Episode) -> QuerySet[ExpertGrade]:
    return (ExpertGrade.objects.filter(episode=episode, status=ExpertGrade.Status.SUBMITTED)
            .exclude(assignment__role=ExpertAssignment.Role.GOLD))


def staff_adjudicator_profile(user: Any) -> ExpertProfile:
    """Return (creating if needed) the profile a staff member grades under; it has no sectors, so routing
    never sends them work on its own."""
    profile, _ = ExpertProfile.objects.get_or_create(user=user, defaults={"is_active": True, "bio": "Staff"})
    return profile


def adjudication_request(*, episode: Episode, actor: Any, adjudicator: ExpertProfile | None = None
                         ) -> ExpertAssignment:
    """Send a double-graded episode to a third grader (an expert, or the staff member when none is given).

    The adjudicator grades blind like everyone else; their grade then decides the episode's expert score.
    """
    with transaction.atomic():
        locked = Episode.objects.select_for_update(of=("self",)).select_related("task", "study").get(pk=episode.pk)
        graded = _submitted_grades(locked)
        latest = graded.aggregate(k=Max("attempt"))["k"]
        if latest is None or graded.filter(attempt=latest, assignment__role__in=GRADER_ROLES).count() < 2:
            raise RoutingError("Only episodes with two submitted independent grades can go to adjudication.")
        if locked.expert_assignments.filter(role=ExpertAssignment.Role.ADJUDICATION, status__in=LIVE).exists():
            raise RoutingError("This episode is already with an adjudicator.")
        if adjudicator is None:
            adjudicator = staff_adjudicator_profile(actor)
        elif not adjudicator.is_active or not adjudicator.sectors.filter(pk=locked.task.sector_id).exists():
            raise RoutingError(f"{adjudicator.user} does not work in this task's sector.")
        if locked.expert_assignments.filter(expert=adjudicator).exists():
            raise RoutingError(f"{adjudicator.user} already graded this episode; choose a third person.")
        assignment = _assign(locked, adjudicator, ExpertAssignment.Role.ADJUDICATION, actor)
        audit_record(actor=actor, action="episode.adjudication_request", obj=locked, study=locked.study,
                     after={"adjudicator": adjudicator.pk, "assignment": assignment.pk})
    return assignment


def episode_route_reattempt(*, episode: Episode, actor: Any, expert: ExpertProfile | None = None
                            ) -> ExpertAssignment:
    """Record a re-attempt: the revised deliverable is graded as attempt k+1 against the same rubric.

    Each expert grades an episode at most once, so attempt k+1 goes to someone who has not graded it.
    """
    with transaction.atomic():
        locked = (Episode.objects.select_for_update(of=("self",)).select_related("task", "study", "participant")
                  .get(pk=episode.pk))
        last = _submitted_grades(locked).order_by("-attempt", "-submitted_at").first()
        if last is None:
            raise RoutingError("A re-attempt needs a submitted expert grade of the earlier attempt.")
        if locked.expert_assignments.filter(status__in=OPEN).exists():
            raise RoutingError("This episode still has open grading work; finish or withdraw it first.")
        taken = set(locked.expert_assignments.values_list("expert_id", flat=True))
        if expert is None:
            expert = experts_by_load(sector_id=locked.task.sector_id, exclude_profiles=taken,
                                     exclude_user_id=locked.participant.user_id).first()
            if expert is None:
                raise RoutingError("No expert in this sector is free to grade the re-attempt.")
        elif expert.pk in taken:
            raise RoutingError(f"{expert.user} already graded this episode; choose someone else.")
        assignment = _assign(locked, expert, ExpertAssignment.Role.PRIMARY, actor)
        ExpertGrade.objects.create(assignment=assignment, episode=locked, expert=expert, rubric=last.rubric,
                                   attempt=last.attempt + 1)
        audit_record(actor=actor, action="episode.reattempt_route", obj=locked, study=locked.study,
                     after={"attempt": last.attempt + 1, "expert": expert.pk, "rubric": last.rubric_id})
    return assignment

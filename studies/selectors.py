"""Reads for the worker journey: where a participant stands, and the rows each worker page shows.

Every episode/participant lookup here is scoped to the requesting account, so a view that uses these
selectors cannot show another worker's data; a miss raises DoesNotExist, which views turn into a 404.
Nothing here selects hidden evaluator information, rubrics or scores for worker pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Sum
from django.urls import reverse

from studies.models import (
    ConsentVersion,
    Episode,
    EpisodeFile,
    Occupation,
    Participant,
    Payment,
    Sector,
    Study,
    TaskFile,
)

FINISHED = frozenset({
    Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED,
    Episode.Status.SKIPPED,
})
# Fields a worker page may load from a task: everything except the hidden evaluator information.
TASK_WORKER_FIELDS = ("task__id", "task__uuid", "task__title", "task__prompt", "task__required_software",
                      "task__expected_deliverables", "task__time_limit_minutes", "task__updated_at",
                      "task__sector_id")


class Step(StrEnum):
    CONSENT = "consent"
    PROFILE = "profile"
    PRE_SURVEY = "pre_survey"
    TASK = "task"
    POST_SURVEY = "post_survey"
    COMPLETE = "complete"
    WITHDRAWN = "withdrawn"


STEP_LABELS = {
    Step.CONSENT: "Consent", Step.PROFILE: "Your occupation", Step.PRE_SURVEY: "First survey",
    Step.TASK: "Tasks", Step.POST_SURVEY: "Final survey", Step.COMPLETE: "Done",
}
_NEXT_LABELS = {
    Step.CONSENT: "the consent form", Step.PROFILE: "your occupation", Step.PRE_SURVEY: "the first survey",
    Step.POST_SURVEY: "the final survey", Step.COMPLETE: "your completion code", Step.WITHDRAWN: "the overview",
}
_ORDER = [Step.CONSENT, Step.PROFILE, Step.PRE_SURVEY, Step.TASK, Step.POST_SURVEY, Step.COMPLETE]


@dataclass
class JourneyState:
    """Where a participant stands: the step they should be on and what is done."""

    participant: Participant
    consent_required: ConsentVersion | None
    consent_unavailable: bool
    episodes: list[Episode] = field(default_factory=list)
    step: Step = Step.CONSENT
    position: int | None = None

    @property
    def tasks_total(self) -> int:
        return self.participant.study.tasks_per_session

    @property
    def submitted_count(self) -> int:
        """Tasks whose deliverables were submitted: the ones that are paid and graded."""
        return sum(1 for e in self.episodes if e.status in FINISHED and e.status != Episode.Status.SKIPPED)

    @property
    def skipped_count(self) -> int:
        return sum(1 for e in self.episodes if e.status == Episode.Status.SKIPPED)

    @property
    def paid_count(self) -> int:
        """Tasks with a base-pay line in the ledger (equal to ``submitted_count`` unless staff intervened)."""
        if not hasattr(self, "_paid_count"):
            self._paid_count = Payment.objects.filter(participant=self.participant, kind=Payment.Kind.TASK).count()
        return self._paid_count

    @property
    def pay_summary(self) -> str:
        """Pay for submitted tasks as the ledger has it: recorded is not yet paid out, and the wording says so."""
        lines = Payment.objects.filter(participant=self.participant, kind=Payment.Kind.TASK)
        recorded, paid = self.paid_count, lines.filter(paid_at__isnull=False).count()
        tasks = f"{recorded} task{'s' if recorded != 1 else ''}"
        if paid == recorded:
            return f"paid for {tasks}"
        if paid == 0:
            return f"pay recorded for {tasks}, not paid out yet"
        return f"pay recorded for {tasks}: {paid} paid out, {recorded - paid} pending"

    @property
    def tasks_summary(self) -> str:
        """The one wording of task progress every worker page uses, e.g. "2 submitted, 1 skipped of 5"."""
        text = f"{self.submitted_count} submitted"
        if self.skipped_count:
            text += f", {self.skipped_count} skipped"
        return f"{text} of {self.tasks_total}"

    @property
    def label(self) -> str:
        if self.step == Step.TASK:
            return f"task {self.position} of {self.tasks_total}"
        return _NEXT_LABELS[self.step]

    @property
    def url(self) -> str:
        return step_url(self.participant.study, self.step, self.position)

    def reached(self, step: Step) -> bool:
        """Whether the participant may open ``step`` (earlier steps stay viewable)."""
        if self.step == Step.WITHDRAWN:
            return False
        return _ORDER.index(step) <= _ORDER.index(self.step)

    def steps(self) -> list[dict[str, Any]]:
        """The progress bar: each step with done / current / upcoming."""
        rows = []
        current = _ORDER.index(self.step) if self.step in _ORDER else -1
        for index, step in enumerate(_ORDER):
            label = STEP_LABELS[step]
            if step == Step.TASK:
                label = f"Tasks ({self.tasks_summary})"
            state = "done" if index < current else "current" if index == current else "upcoming"
            if step == Step.COMPLETE and self.step == Step.COMPLETE:
                state = "done"
            rows.append({"step": step.value, "label": label, "state": state})
        return rows


def step_url(study: Study, step: Step, position: int | None = None) -> str:
    slug = study.slug
    if step == Step.CONSENT:
        return reverse("worker:consent", args=[slug])
    if step == Step.PROFILE:
        return reverse("worker:profile", args=[slug])
    if step == Step.PRE_SURVEY:
        return reverse("worker:survey", args=[slug, "pre"])
    if step == Step.TASK:
        return reverse("worker:task", args=[slug, position or 1])
    if step == Step.POST_SURVEY:
        return reverse("worker:survey", args=[slug, "post"])
    if step == Step.COMPLETE:
        return reverse("worker:complete", args=[slug])
    return reverse("worker:study", args=[slug])


def participants_of_user(user: Any) -> QuerySet[Participant]:
    return Participant.objects.filter(user_id=user.pk).select_related("study").order_by("-created_at")


def participant_for_user(*, user: Any, study_slug: str) -> Participant:
    """Return the account's participant in a study (raises Participant.DoesNotExist otherwise).

    The numbers of the consent version accepted and of the study's latest one come with it, so every worker
    page can tell that consent is current without two more queries (:func:`consent_version_required`).
    """
    latest = ConsentVersion.objects.filter(study_id=OuterRef("study_id")).order_by("-version").values("version")[:1]
    return (Participant.objects.select_related("study", "occupation", "occupation__sector")
            .annotate(accepted_consent_number=F("consent_version__version"),
                      latest_consent_number=Subquery(latest))
            .get(user_id=user.pk, study__slug=study_slug))


def consent_version_required(participant: Participant) -> ConsentVersion | None:
    """Return the version the participant must accept now, or None when their consent is current.

    Someone who never accepted must accept the latest version; someone who accepted an older one must accept
    again only if a newer version was published with ``requires_reconsent`` (a staff choice per version).
    """
    latest = getattr(participant, "latest_consent_number", None)
    if latest is not None and participant.consent_version_id is not None and \
            latest == getattr(participant, "accepted_consent_number", None):
        return None  # the latest version is the one accepted (read with the participant)
    current = participant.study.current_consent()
    if current is None:
        return None
    accepted = participant.consent_version
    if accepted is None:
        return current
    if current.version > accepted.version and participant.study.consent_versions.filter(
        version__gt=accepted.version, requires_reconsent=True
    ).exists():
        return current
    return None


def journey_state(participant: Participant) -> JourneyState:
    """Work out the step the participant should be on (two to three queries)."""
    required = None if participant.status == Participant.Status.WITHDRAWN else consent_version_required(participant)
    unavailable = participant.consent_version_id is None and required is None
    state = JourneyState(participant=participant, consent_required=required, consent_unavailable=unavailable)
    state.episodes = list(
        Episode.objects.filter(participant=participant).select_related("agent")
        .only("id", "position", "status", "participant_id", "agent__name", "agent__id", "submitted_at",
              "timed_out", "skip_reason", "task_id")
        .order_by("position")
    )
    status = participant.status
    if status == Participant.Status.WITHDRAWN:
        state.step = Step.WITHDRAWN
    elif required is not None or participant.consent_version_id is None:
        state.step = Step.CONSENT
    elif participant.occupation_id is None or status in (Participant.Status.INVITED, Participant.Status.CONSENTED):
        state.step = Step.PROFILE
    elif status == Participant.Status.PRE_SURVEY:
        state.step = Step.PRE_SURVEY
    elif status == Participant.Status.WORKING:
        state.step = Step.TASK
        open_positions = [e.position for e in state.episodes if e.status not in FINISHED]
        state.position = min(open_positions) if open_positions else len(state.episodes) + 1
    elif status == Participant.Status.POST_SURVEY:
        state.step = Step.POST_SURVEY
    else:
        state.step = Step.COMPLETE
    return state


def occupation_search(
    query: str, *, limit: int = 25, study: Study | None = None, reach: dict[int, int] | None = None
) -> list[Occupation]:
    """Occupations whose title or SOC code contains every word typed (case-insensitive).

    With a study, only occupations that can still be matched to at least one of its tasks are returned, each
    with ``reach`` (how many tasks its sector and fallbacks still offer; the study's :func:`sector_reach`, when
    the caller has it already), so nobody picks a dead end.
    """
    words = [w for w in (query or "").split() if w][:6]
    if not words:
        return []
    condition = Q()
    for word in words:
        condition &= Q(title__icontains=word) | Q(soc_code__startswith=word)
    rows = Occupation.objects.filter(condition).select_related("sector").order_by("title")
    if study is None:
        return list(rows[:limit])
    reach = sector_reach(study) if reach is None else reach
    rows = rows.filter(sector_id__in=[sector for sector, n in reach.items() if n > 0])
    found = list(rows[:limit])
    for occupation in found:
        occupation.reach = reach.get(occupation.sector_id, 0) if occupation.sector_id is not None else 0
    return found


def occupations_offered(study: Study, *, reach: dict[int, int] | None = None) -> QuerySet[Occupation]:
    """Occupations a worker may choose in this study: those with at least one reachable task (``reach``: the
    study's :func:`sector_reach`, when the caller has it already)."""
    reach = sector_reach(study) if reach is None else reach
    return Occupation.objects.filter(sector_id__in=[sector for sector, n in reach.items() if n > 0])


def occupations_by_sector(
    study: Study, *, reach: dict[int, int] | None = None
) -> list[tuple[str, list[Occupation]]]:
    """Every occupation a worker may choose in the study, grouped by sector, each with its ``reach`` (for
    browsing when a search finds nothing)."""
    reach = sector_reach(study) if reach is None else reach
    groups: dict[str, list[Occupation]] = {}
    rows = (Occupation.objects.filter(sector_id__in=list(reach)).select_related("sector")
            .order_by("sector__name", "title"))
    for occupation in rows:
        occupation.reach = reach.get(occupation.sector_id, 0) if occupation.sector_id is not None else 0
        groups.setdefault(occupation.sector.name if occupation.sector else "", []).append(occupation)
    return list(groups.items())


def sector_reach(study: Study) -> dict[int, int]:
    """For each sector, how many of the study's tasks with free capacity a worker from it can be matched to
    (own sector plus its fallbacks, as the matching service tries them). Sectors that reach none are absent."""
    from studies.models import SectorFallback, TaskInstance

    open_tasks = (TaskInstance.objects.filter(studies=study, is_active=True, sector_id__isnull=False)
                  .annotate(taken=Count("episodes", filter=Q(episodes__study=study)
                                        & ~Q(episodes__status=Episode.Status.SKIPPED)))
                  .filter(taken__lt=study.max_episodes_per_task).values_list("sector_id", flat=True))
    per_sector: dict[int, int] = {}
    for sector_id in open_tasks:
        per_sector[sector_id] = per_sector.get(sector_id, 0) + 1
    reach = dict(per_sector)
    for from_id, to_id in SectorFallback.objects.filter(study=study).values_list("from_sector_id", "to_sector_id"):
        if per_sector.get(to_id):
            reach[from_id] = reach.get(from_id, 0) + per_sector[to_id]
    return {sector: n for sector, n in reach.items() if n > 0}


def occupation_get(occupation_id: int | str) -> Occupation | None:
    return Occupation.objects.select_related("sector").filter(pk=occupation_id).first()


def _reconsent_needed() -> Exists:
    return Exists(ConsentVersion.objects.filter(
        study_id=OuterRef("participant__study_id"), requires_reconsent=True,
        version__gt=OuterRef("participant__consent_version__version"),
    ))


def episodes_of_user(user: Any) -> QuerySet[Episode]:
    """Episodes owned by the account, with what worker pages need and without hidden task fields."""
    return (Episode.objects.filter(participant__user_id=user.pk)
            .select_related("participant", "participant__study", "agent", "task")
            .defer("task__hidden_info"))


def episode_for_task_page(*, user: Any, study_slug: str, position: int) -> Episode:
    """The episode shown on a task page, with its participant, study, agent and task in one query."""
    return (episodes_of_user(user).annotate(reconsent_needed=_reconsent_needed())
            .get(participant__study__slug=study_slug, position=position))


def episode_for_user(*, user: Any, episode_id: int) -> Episode:
    return episodes_of_user(user).get(pk=episode_id)


def reference_files(task_id: int) -> list[TaskFile]:
    """Reference files of a task; hidden evaluator files are never part of this list."""
    return list(TaskFile.objects.filter(task_id=task_id, kind=TaskFile.Kind.REFERENCE)
                .select_related("task").only("id", "name", "size", "file", "kind", "task__updated_at")
                .order_by("name"))


def reference_file(*, task_id: int, file_id: int) -> TaskFile:
    return TaskFile.objects.get(task_id=task_id, kind=TaskFile.Kind.REFERENCE, pk=file_id)


def episode_files(episode: Episode) -> list[EpisodeFile]:
    return list(EpisodeFile.objects.filter(episode=episode).order_by("kind", "name"))


def participant_payments(participant: Participant) -> tuple[list[Payment], Any]:
    rows = Payment.objects.filter(participant=participant).order_by("created_at")
    return list(rows), rows.aggregate(total=Sum("amount"))["total"]



@dataclass(frozen=True)
class TaskMatch:
    """How a task relates to the worker's occupation: the task page says so instead of implying "your field"."""

    kind: str  # "occupation": listed for their occupation; "sector": their sector; "related": a fallback sector
    worker_sector: str
    task_sector: str


def task_match(episode: Episode) -> TaskMatch:
    """Return whether the episode's task is from the worker's own occupation, sector, or a related sector."""
    participant, task = episode.participant, episode.task
    occupation = (Occupation.objects.select_related("sector").filter(pk=participant.occupation_id).first()
                  if participant.occupation_id else None)
    worker_sector = occupation.sector if occupation is not None else None
    task_sector = Sector.objects.filter(pk=task.sector_id).first() if task.sector_id else None
    names = (worker_sector.name if worker_sector else "", task_sector.name if task_sector else "")
    if occupation is not None and task.occupations.filter(pk=occupation.pk).exists():
        return TaskMatch("occupation", *names)
    if worker_sector is not None and task_sector is not None and worker_sector.pk == task_sector.pk:
        return TaskMatch("sector", *names)
    return TaskMatch("related", *names)

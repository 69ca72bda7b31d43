"""Reads for blind comparisons: what an expert may open, the staff overview, and the plain data the preference
model consumes.

Arms. A deliverable comes from one of three arms: a worker with an agent (``human_agent``), a worker alone
(``human_alone``, a solo-condition episode) or an agent alone (``agent_alone``, a solo-agent baseline run,
stored as a ``SoloRun`` rather than an episode). Arms are named per agent where there is one
("Worker + Claude Code", "Claude Code alone"); only staff pages and exports ever see them.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Prefetch, Q, QuerySet

from experts.models import (
    ComparisonAssignment,
    ComparisonItem,
    ComparisonPlacement,
    ComparisonSet,
    ExpertAssignment,
    ExpertProfile,
)
from grading.models import Extraction
from rating.models import GradeObservation
from studies.models import Episode, EpisodeFile, SoloRun, SoloRunFile, Study, TaskInstance

OPEN = (ComparisonAssignment.Status.ASSIGNED, ComparisonAssignment.Status.IN_PROGRESS)
HUMAN_AGENT, HUMAN_ALONE, AGENT_ALONE = "human_agent", "human_alone", "agent_alone"
ACCEPTABILITY_CODE = {"ready": 4, "minor": 3, "major": 2, "unusable": 1}
SUBMITTED_STATES = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED)


# --------------------------------------------------------------------------------------------------------
# Arms
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arm:
    kind: str
    agent_id: int | None
    agent_name: str

    @property
    def label(self) -> str:
        if self.kind == HUMAN_AGENT:
            return f"Worker + {self.agent_name}"
        if self.kind == AGENT_ALONE:
            return f"{self.agent_name} alone"
        return "Worker alone"


def item_arm(item: ComparisonItem) -> Arm:
    """The arm of a set's deliverable (the item must carry its episode's or run's agent)."""
    if item.solo_run_id is not None:
        return Arm(AGENT_ALONE, item.solo_run.agent_id, item.solo_run.agent.name)
    episode = item.episode
    if episode.agent_id is None:
        return Arm(HUMAN_ALONE, None, "")
    return Arm(HUMAN_AGENT, episode.agent_id, episode.agent.name)


def _items_prefetch() -> Prefetch:
    return Prefetch("items", ComparisonItem.objects.select_related(
        "episode__agent", "episode__participant", "solo_run__agent").order_by("pk"))


# --------------------------------------------------------------------------------------------------------
# What an expert may open
# --------------------------------------------------------------------------------------------------------


def expert_comparisons(profile: ExpertProfile) -> QuerySet[ComparisonAssignment]:
    """The expert's own comparisons; withdrawn ones, and open ones whose deliverable they grade, disappear."""
    grades_one = ExpertAssignment.objects.filter(
        expert=profile, episode__comparison_items__comparison_set=OuterRef("comparison_set")
    ).exclude(status=ExpertAssignment.Status.CANCELLED)
    return (ComparisonAssignment.objects.filter(expert=profile)
            .exclude(status=ComparisonAssignment.Status.CANCELLED)
            .exclude(Q(status__in=OPEN) & Q(Exists(grades_one)))
            .select_related("expert", "comparison_set__task__sector", "comparison_set__study"))


def expert_comparison_queue(profile: ExpertProfile) -> dict[str, list[ComparisonAssignment]]:
    """Open comparisons (oldest first, with how many deliverables each shows) and the last 20 submitted."""
    qs = expert_comparisons(profile).annotate(n_shown=Count("placements"))
    return {"open": list(qs.filter(status__in=OPEN).order_by("assigned_at", "pk")),
            "done": list(qs.filter(status=ComparisonAssignment.Status.SUBMITTED).order_by("-submitted_at")[:20])}


@dataclass
class ShownFile:
    index: int
    name: str  # the stored name: staff only, never on the expert's page (it may hint at the arm)
    size: int
    sha256: str
    file: Any
    shown_name: str = ""  # what the expert sees and downloads: position, number and the file's extension


@dataclass
class ShownDeliverable:
    """One deliverable as the expert sees it: its shown position, files and answer, nothing about its arm."""

    position: int
    files: list[ShownFile]
    rank: int | None = None
    acceptability: str = ""
    error: str = ""
    placement: ComparisonPlacement | None = None
    preview: Any = None


def placement_files(placement: ComparisonPlacement) -> list[ShownFile]:
    """The deliverable files behind a shown position, numbered from 1 in name order, with neutral names.

    A stored name can tell the arm (an agent's own naming habit, a harness's fixed output name, a worker's
    "final_v12"), so the expert sees ``deliverable-<position>-file-<n>`` with only the extension kept, which
    the file needs to open.
    """
    item = placement.item
    rows: list[EpisodeFile] | list[SoloRunFile]
    if item.episode_id is not None:
        rows = list(EpisodeFile.objects.filter(episode_id=item.episode_id, kind=EpisodeFile.Kind.DELIVERABLE)
                    .order_by("name", "pk"))
    else:
        rows = list(SoloRunFile.objects.filter(run_id=item.solo_run_id, kind=SoloRunFile.Kind.DELIVERABLE)
                    .order_by("name", "pk"))
    return [ShownFile(index, row.name, row.size, row.sha256, row.file,
                      shown_file_name(placement.position, index, row.name))
            for index, row in enumerate(rows, start=1)]


_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")


def shown_file_name(position: int, index: int, stored_name: str) -> str:
    """The neutral name of a deliverable's file on a comparison page (extension kept when it is plain)."""
    match = _EXTENSION.search(stored_name.rsplit("/", 1)[-1])
    return f"deliverable-{position}-file-{index}{match.group(0).lower() if match else ''}"


def shown_part_name(part_name: str, files: list[ShownFile]) -> str:
    """A preview part's name with the stored file name replaced by the shown one (archive members keep their
    path inside the archive, which is the deliverable's own content)."""
    for shown in sorted(files, key=lambda f: len(f.name), reverse=True):
        if part_name == shown.name or part_name.startswith(shown.name + "/"):
            return shown.shown_name + part_name[len(shown.name):]
    return "part of deliverable"


def shown_deliverables(assignment: ComparisonAssignment, *, posted: dict[int, tuple[int | None, str]] | None = None,
                       problems: dict[str, str] | None = None) -> list[ShownDeliverable]:
    """The set in the expert's shown order with the saved (or just posted) answers and any problem."""
    out = []
    for placement in assignment.placements.select_related("item").order_by("position"):
        rank, acceptability = (posted or {}).get(placement.position, (placement.rank, placement.acceptability))
        out.append(ShownDeliverable(placement.position, placement_files(placement), rank, acceptability,
                                    (problems or {}).get(str(placement.position), ""), placement))
    return out


def placement_extraction(placement: ComparisonPlacement) -> dict[str, Any] | None:
    """The stored judge-ready text of the deliverable behind a position, if grading stored it."""
    item = placement.item
    lookup = {"episode_id": item.episode_id} if item.episode_id else {"solo_run_id": item.solo_run_id}
    return Extraction.objects.filter(**lookup).values_list("content", flat=True).first()


# --------------------------------------------------------------------------------------------------------
# Staff
# --------------------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    """A deliverable staff may put in a set, with what only staff see."""

    kind: str  # "episode" or "solo_run"
    pk: int
    arm: Arm
    who: str
    score: float | None
    submitted_at: Any


def comparison_candidates(study: Study, task: TaskInstance) -> list[Candidate]:
    """Submitted episodes and solo-agent runs of the task in the study that have deliverable files."""
    episodes = (Episode.objects.filter(study=study, task=task, status__in=SUBMITTED_STATES, is_gold=False,
                                       is_simulated=False, files__kind=EpisodeFile.Kind.DELIVERABLE)
                .distinct().select_related("agent", "participant").order_by("submitted_at", "pk"))
    runs = (SoloRun.objects.filter(study=study, task=task, files__kind=SoloRunFile.Kind.DELIVERABLE).distinct()
            .select_related("agent").order_by("created_at", "pk"))
    out = []
    for episode in episodes:
        arm = Arm(HUMAN_AGENT, episode.agent_id, episode.agent.name) if episode.agent_id else Arm(HUMAN_ALONE, None, "")
        out.append(Candidate("episode", episode.pk, arm, episode.participant.pseudonym, episode.score,
                             episode.submitted_at))
    for run in runs:
        out.append(Candidate("solo_run", run.pk, Arm(AGENT_ALONE, run.agent_id, run.agent.name), "—", run.score,
                             run.created_at))
    return out


def proposed_candidates(candidates: list[Candidate]) -> set[tuple[str, int]]:
    """Propose one deliverable per arm (the earliest), at most four, for the staff form's initial ticks."""
    chosen: dict[Arm, Candidate] = {}
    for candidate in candidates:
        chosen.setdefault(candidate.arm, candidate)
    # Prefer the contrasts the study is about: the worker alone and the agent alone before a second agent.
    ordered = sorted(chosen.values(), key=lambda c: ({HUMAN_AGENT: 0, HUMAN_ALONE: 1, AGENT_ALONE: 2}[c.arm.kind],
                                                     c.pk))
    return {(c.kind, c.pk) for c in ordered[:4]} if len(ordered) >= 2 else set()


def tasks_with_deliverables(study: Study) -> QuerySet[TaskInstance]:
    """Tasks of the study with at least one submitted episode or solo run holding deliverables."""
    episodes = Episode.objects.filter(study=study, task=OuterRef("pk"), status__in=SUBMITTED_STATES, is_gold=False,
                                      is_simulated=False, files__kind=EpisodeFile.Kind.DELIVERABLE)
    runs = SoloRun.objects.filter(study=study, task=OuterRef("pk"), files__kind=SoloRunFile.Kind.DELIVERABLE)
    return TaskInstance.objects.filter(Q(Exists(episodes)) | Q(Exists(runs))).order_by("title", "pk")


def comparison_sets(study: Study) -> QuerySet[ComparisonSet]:
    return (ComparisonSet.objects.filter(study=study).select_related("task", "created_by")
            .prefetch_related(_items_prefetch(),
                              Prefetch("assignments", ComparisonAssignment.objects.select_related("expert__user")
                                       .prefetch_related(Prefetch("placements",
                                                                  ComparisonPlacement.objects.order_by("position")))
                                       .order_by("pk")))
            .order_by("-created_at", "-pk"))


def assignable_experts() -> QuerySet[ExpertProfile]:
    return ExpertProfile.objects.filter(is_active=True).select_related("user").order_by("user__username")


# --------------------------------------------------------------------------------------------------------
# Plain data for the preference model and the exports
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparedDeliverable:
    """One shown deliverable of a submitted comparison, in shown order (``position`` 1 = shown first)."""

    position: int
    item_id: int
    episode_id: int | None
    solo_run_id: int | None
    arm: str
    arm_label: str
    agent_id: int | None
    agent_name: str
    participant_id: int | None
    task_id: int
    rank: int
    acceptability: str
    acceptability_code: int
    length_chars: int | None
    size_bytes: int


@dataclass(frozen=True)
class SubmittedComparison:
    """One expert's submitted ranking of one set. Lower rank is better; equal ranks are ties."""

    assignment_id: int
    set_id: int
    expert_id: int
    task_id: int
    order_probability: float
    time_spent_seconds: int
    submitted_at: Any
    justification: str
    shown: tuple[ComparedDeliverable, ...] = field(default_factory=tuple)


def deliverable_sizes(study: Study | int) -> dict[tuple[str, int], int]:
    """Total deliverable bytes of the study's compared episodes and solo runs, keyed ("episode"|"solo_run", id)."""
    items = ComparisonItem.objects.filter(comparison_set__study=study)
    out: dict[tuple[str, int], int] = defaultdict(int)
    for episode_id, size in EpisodeFile.objects.filter(
            episode_id__in=items.filter(episode__isnull=False).values("episode_id"),
            kind=EpisodeFile.Kind.DELIVERABLE).values_list("episode_id", "size"):
        out[("episode", episode_id)] += size
    for run_id, size in SoloRunFile.objects.filter(
            run_id__in=items.filter(solo_run__isnull=False).values("solo_run_id"),
            kind=SoloRunFile.Kind.DELIVERABLE).values_list("run_id", "size"):
        out[("solo_run", run_id)] += size
    return dict(out)


def deliverable_lengths(study: Study | int) -> dict[tuple[str, int], int]:
    """Characters of extracted text of the study's episodes and solo runs (only those grading extracted)."""
    out = {("episode", e): n for e, n in Extraction.objects.filter(episode__study=study, episode__isnull=False)
           .values_list("episode_id", "total_chars")}
    out.update({("solo_run", r): n for r, n in Extraction.objects.filter(solo_run__study=study, solo_run__isnull=False)
                .values_list("solo_run_id", "total_chars")})
    return out


def _source_key(item: ComparisonItem) -> tuple[str, int]:
    return ("episode", item.episode_id) if item.episode_id else ("solo_run", item.solo_run_id)


def study_submitted_comparisons(study: Study | int) -> list[SubmittedComparison]:
    """Return every submitted comparison of the study as plain data, oldest first.

    ``length_chars`` is the extracted text length the judges saw (None when nothing was extracted yet);
    ``size_bytes`` the deliverable files' total size.
    """
    study_id = study if isinstance(study, int) else study.pk
    assignments = list(
        ComparisonAssignment.objects.filter(comparison_set__study_id=study_id,
                                            status=ComparisonAssignment.Status.SUBMITTED)
        .select_related("comparison_set")
        .prefetch_related(Prefetch("placements", ComparisonPlacement.objects.select_related(
            "item__episode__agent", "item__solo_run__agent").order_by("position")))
        .order_by("submitted_at", "pk"))
    sizes, lengths = deliverable_sizes(study_id), deliverable_lengths(study_id)
    out = []
    for assignment in assignments:
        shown = []
        for placement in assignment.placements.all():
            item, arm = placement.item, item_arm(placement.item)
            source = item.episode if item.episode_id else item.solo_run
            shown.append(ComparedDeliverable(
                position=placement.position, item_id=item.pk, episode_id=item.episode_id,
                solo_run_id=item.solo_run_id, arm=arm.kind, arm_label=arm.label, agent_id=arm.agent_id,
                agent_name=arm.agent_name, participant_id=item.episode.participant_id if item.episode_id else None,
                task_id=source.task_id, rank=int(placement.rank or 0), acceptability=placement.acceptability,
                acceptability_code=ACCEPTABILITY_CODE.get(placement.acceptability, 0),
                length_chars=lengths.get(_source_key(item)), size_bytes=sizes.get(_source_key(item), 0)))
        out.append(SubmittedComparison(
            assignment_id=assignment.pk, set_id=assignment.comparison_set_id, expert_id=assignment.expert_id,
            task_id=assignment.comparison_set.task_id, order_probability=assignment.order_probability,
            time_spent_seconds=assignment.time_spent_seconds, submitted_at=assignment.submitted_at,
            justification=assignment.justification, shown=tuple(shown)))
    return out


@dataclass(frozen=True)
class PairCount:
    """Raw counts for one pair of arms over every pair of deliverables ranked in one comparison."""

    arm_a: str
    arm_b: str
    a_wins: int
    b_wins: int
    ties: int

    @property
    def n(self) -> int:
        return self.a_wins + self.b_wins + self.ties


def raw_arm_pair_counts(comparisons: list[SubmittedComparison]) -> list[PairCount]:
    """Count wins and ties between arms over all deliverable pairs of each comparison (raw, unmodelled).

    Pairs of the same arm (two workers with the same agent) are counted too, under that arm against itself,
    as ties or as a win of "either"; they say how often experts separate work of one arm.
    """
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for comparison in comparisons:
        shown = comparison.shown
        for i, first in enumerate(shown):
            for second in shown[i + 1:]:
                a, b = sorted((first, second), key=lambda d: d.arm_label)
                row = counts[(a.arm_label, b.arm_label)]
                if a.rank == b.rank:
                    row[2] += 1
                elif a.rank < b.rank:
                    row[0] += 1
                else:
                    row[1] += 1
    return [PairCount(a, b, *row) for (a, b), row in sorted(counts.items())]


def preferences_fingerprint(study: Study) -> str | None:
    """A stamp that changes whenever the rankings or scores behind the analysis may have; ``None`` without a
    submitted comparison (then there is nothing to fit)."""
    submitted = ComparisonAssignment.objects.filter(comparison_set__study=study,
                                                    status=ComparisonAssignment.Status.SUBMITTED)
    comps = submitted.aggregate(n=Count("pk"), t=Max("submitted_at"))
    if not comps["n"]:
        return None
    parts = (
        sorted(submitted.values_list("pk", flat=True)), str(comps["t"]),
        sorted(GradeObservation.objects.filter(study=study, active=True).values_list("pk", "y")),
        sorted(Episode.objects.filter(study=study, score__isnull=False).values_list("pk", "score")),
        sorted(SoloRun.objects.filter(study=study, score__isnull=False).values_list("pk", "score")),
    )
    return f"{comps['n']}.{hashlib.sha256(repr(parts).encode()).hexdigest()[:16]}"

"""The counts that more than one staff page shows, each read in one place.

A number that appears on two pages (participants, episodes, survey respondents, rated participants, …) comes
from the function here, so the pages cannot disagree; where two pages show numbers that differ because they
count different things, the pages name them differently (``tests/console/dashboard/test_flow_counts.py``
reads every page of a study and checks both). Templates mark each shared count with ``data-count="<name>"``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count

from rating import selectors as rating_selectors
from rating.models import EntityRating
from studies.models import Episode, Participant, Study, TaskInstance
from surveys.selectors import respondent_counts


@dataclass(frozen=True)
class StudyCounts:
    """One study's shared counts; each field's comment is the label the pages use for it."""

    participants: int  # participants who joined, in any state
    by_status: dict[str, int]  # participants at each step now
    answered_pre: int  # survey respondents before the tasks
    answered_post: int  # survey respondents after the tasks
    answered_both: int  # respondents to both surveys
    tasks: int  # task instances of the study
    episodes: int  # episodes (one worker doing one task with one agent), in any state
    submissions_waiting: int  # episodes submitted and not yet picked up by grading
    graded: int  # episodes graded
    observations: int | None  # observations in the latest posterior (None before the first)
    rated_participants: int | None  # participants with a skill in the latest posterior

    @property
    def reached_post_survey(self) -> int:
        """Return the participants at or past the post-survey step (withdrawn people are not)."""
        return sum(self.by_status.get(status, 0) for status in (Participant.Status.POST_SURVEY,
                                                                Participant.Status.COMPLETE))


def participants_by_status(study: Study) -> dict[str, int]:
    """Return ``{status: participants}`` of one study (one query)."""
    return dict(
        Participant.objects.filter(study=study).values("status").annotate(n=Count("pk"))
        .values_list("status", "n").order_by()
    )


def participant_totals(studies: Iterable[Study]) -> dict[int, int]:
    """Return ``{study id: participants}`` for many studies (one query)."""
    return dict(
        Participant.objects.filter(study__in=list(studies)).values("study_id").annotate(n=Count("pk"))
        .values_list("study_id", "n").order_by()
    )


def episode_totals(studies: Iterable[Study]) -> dict[int, int]:
    """Return ``{study id: episodes}`` for many studies (one query)."""
    return dict(
        Episode.objects.filter(study__in=list(studies)).values("study_id").annotate(n=Count("pk"))
        .values_list("study_id", "n").order_by()
    )


def tasks_by_sector(study: Study) -> dict[int, int]:
    """Return ``{sector id: task instances of the study}`` (one query)."""
    return dict(
        TaskInstance.objects.filter(studies=study).values("sector_id").annotate(n=Count("pk"))
        .values_list("sector_id", "n").order_by()
    )


def study_counts(study: Study) -> StudyCounts:
    """Return the study's shared counts (six queries, whatever the size of the study)."""
    by_status = participants_by_status(study)
    episodes = dict(
        Episode.objects.filter(study=study).values("status").annotate(n=Count("pk")).values_list("status", "n")
        .order_by()
    )
    respondents = respondent_counts(study)
    snapshot = rating_selectors.latest_snapshot(study)
    rated = None
    if snapshot is not None:
        rated = rating_selectors.snapshot_ratings(snapshot, EntityRating.Kind.HUMAN).count()
    return StudyCounts(
        participants=sum(by_status.values()),
        by_status=by_status,
        answered_pre=respondents["pre"],
        answered_post=respondents["post"],
        answered_both=respondents["both"],
        tasks=TaskInstance.objects.filter(studies=study).count(),
        episodes=sum(episodes.values()),
        submissions_waiting=episodes.get(Episode.Status.SUBMITTED, 0),
        graded=episodes.get(Episode.Status.GRADED, 0),
        observations=snapshot.n_observations if snapshot is not None else None,
        rated_participants=rated,
    )

"""The leaderboard's graders panel: the grader analysis runs as a job and its verdict and tables show."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from console.dashboard import services
from rating.services.ledger import GradeInput, episode_grades_record
from studies.models import Agent, BackgroundJob


def _grade_twice(populated, *, bonus: float) -> None:
    """Give every episode a second judge (anthropic) that adds ``bonus`` points to the first agent's work."""
    Agent.objects.filter(pk=populated.agents[0].pk).update(family="anthropic")
    rng = np.random.default_rng(2)
    for episode in populated.episodes:
        extra = bonus if episode.agent_id == populated.agents[0].pk else 0.0
        score = float(episode.score)
        episode_grades_record(episode_id=episode.pk, kind="judge", grades=[
            GradeInput(grader="openai/gpt-4.1", family="openai", y=score, source_id=1),
            GradeInput(grader="anthropic/claude-sonnet-4-6", family="anthropic",
                       y=float(np.clip(score + 2 + extra + rng.normal(0, 2), 0, 100)), source_id=2),
        ])


@pytest.mark.django_db
def test_the_leaderboard_starts_the_grader_analysis_and_then_shows_its_verdict(
    staff_client, populated, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    _grade_twice(populated, bonus=6.0)
    url = reverse("dashboard:leaderboard", args=[populated.study.slug])
    with django_capture_on_commit_callbacks(execute=True):
        first = staff_client.get(url).content.decode()
    job = BackgroundJob.objects.get(study=populated.study, kind="graders")
    assert ("console.dashboard.tasks.run_analysis", [job.pk]) in sent
    assert "Grader analysis" in first
    services.analysis_job_run(job_id=job.pk)
    page = staff_client.get(url).content.decode()
    assert 'data-testid="graders-verdict">The anthropic/claude-sonnet-4-6 judge scores anthropic agents' in page
    assert "Corrected level" in page and "Panel-mean level" in page
    # The same grades again: the stored result is shown and no second job is started.
    staff_client.get(url)
    assert BackgroundJob.objects.filter(study=populated.study, kind="graders").count() == 1


@pytest.mark.django_db
def test_a_study_without_grades_shows_that_nothing_is_recorded_yet(staff_client, populated):
    page = staff_client.get(reverse("dashboard:leaderboard", args=[populated.study.slug])).content.decode()
    assert "No grade is recorded yet" in page
    assert not BackgroundJob.objects.filter(study=populated.study, kind="graders").exists()


@pytest.mark.django_db
def test_the_graders_panel_says_how_its_episodes_relate_to_the_overviews_graded_count(
    staff_client, populated, monkeypatch
):
    """"749 grades of 375 episodes" beside "374 graded": the panel says which of its episodes are graded."""
    from studies.models import Episode

    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: None)
    _grade_twice(populated, bonus=0.0)
    waiting = populated.episodes[0]
    Episode.objects.filter(pk=waiting.pk).update(status=Episode.Status.SUBMITTED)  # its score not decided yet
    job = services.analysis_request(study=populated.study, kind="graders", actor=None)
    services.analysis_job_run(job_id=job.pk)
    text = staff_client.get(reverse("dashboard:leaderboard", args=[populated.study.slug])).content.decode()
    n = len(populated.episodes)
    assert f"{2 * n} grades of {n} episodes" in text
    assert "each episode has one grade per judge and per expert" in text
    assert (f"Of the {n} episodes with grades now, {n - 1} are graded (the overview's count) and 1 still "
            "waits for its score") in text
    overview = staff_client.get(reverse("dashboard:overview", args=[populated.study.slug])).content.decode()
    assert f'<span data-count="graded">{n - 1}</span> graded.' in overview

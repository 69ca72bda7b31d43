"""Every staff page of a study shows a shared count with the same number, and different things under different names."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from django.urls import reverse
from django.utils import timezone

from console.dashboard import services
from console.dashboard.counts import study_counts
from console.dashboard.exceptions import JobRefused
from grading.models import JudgeRun
from studies.models import BackgroundJob, Episode, Participant
from tests.factories.scenarios import populated_study

PAGES = ("overview", "leaderboard", "surveys", "collaboration", "exports")
COUNT = re.compile(r'data-count="(\w+)"(?: data-study="([\w-]+)")?>(\d+)<')
# Counts that more than one page shows: each must appear on at least two pages, or this test checks nothing.
SHARED = {"participants", "episodes", "answered_pre", "answered_post", "rated_participants"}


@pytest.fixture
def study_with_every_state(db, monkeypatch):
    """A study where the counts differ from each other: people who reached the post-survey without answering
    it, a submission not yet graded, and a judge run waiting for its key."""
    data = populated_study(n_participants=12)
    study = data.study
    waiting = data.participants[0]
    waiting.survey_responses.filter(phase="post").delete()
    Participant.objects.filter(pk=waiting.pk).update(status=Participant.Status.POST_SURVEY)
    episode = data.episodes[0]
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.SUBMITTED, submitted_at=timezone.now())
    JudgeRun.objects.filter(episode__in=data.episodes[1:3]).update(status=JudgeRun.Status.WAITING)
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: None)
    for kind in ("stability", "surveys", "collaboration", "graders"):
        try:
            job = services.analysis_request(study=study, kind=kind, actor=None)
        except JobRefused:
            assert kind == "graders"  # this study records no per-grader grades
            continue
        services.analysis_job_run(job_id=job.pk)
        assert BackgroundJob.objects.get(pk=job.pk).status == "done", kind
    return data


def _counts_on(text: str, slug: str) -> list[tuple[str, int]]:
    return [(name, int(value)) for name, study, value in COUNT.findall(text) if study in ("", slug)]


@pytest.mark.django_db
def test_every_page_shows_each_shared_count_with_the_same_number(staff_client, study_with_every_state):
    study = study_with_every_state.study
    urls = {"index": reverse("dashboard:index")} | {
        page: reverse(f"dashboard:{page}", args=[study.slug]) for page in PAGES
    }
    seen: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for page, url in urls.items():
        response = staff_client.get(url)
        assert response.status_code == 200, page
        assert "data-status-url" not in response.content.decode(), f"{page} still computes an analysis"
        for name, value in _counts_on(response.content.decode(), study.slug):
            seen[name][page].add(value)
    expected = study_counts(study)
    for name, pages in seen.items():
        values = set().union(*pages.values())
        assert values == {getattr(expected, name)}, f"{name} differs between pages: {dict(pages)}"
    for name in SHARED:
        assert len(seen[name]) >= 2, f"{name} is shown on {sorted(seen[name])} only"
    # The survey statistics count their respondents from the answers themselves: the same people.
    result = BackgroundJob.objects.filter(study=study, kind="surveys", status="done").latest("created_at").result
    assert (result["n_respondents_pre"], result["n_respondents_post"], result["n_respondents_both"]) == (
        expected.answered_pre, expected.answered_post, expected.answered_both)
    assert result["n_with_skill"] == expected.rated_participants


@pytest.mark.django_db
def test_counts_of_different_things_carry_different_names(staff_client, study_with_every_state):
    study = study_with_every_state.study
    counts = study_counts(study)
    assert counts.reached_post_survey == counts.answered_post + 1  # the test data makes them differ
    overview = staff_client.get(reverse("dashboard:overview", args=[study.slug])).content.decode()
    surveys = staff_client.get(reverse("dashboard:surveys", args=[study.slug])).content.decode()
    assert f"{counts.reached_post_survey} participants reached the post-survey step" in surveys
    assert "Answered the post-survey" in overview
    # A submission waiting to be graded is not a judge run waiting for its configuration.
    assert counts.submissions_waiting == 1
    assert 'data-count="submissions_waiting">1</span> submissions waiting to be graded' in overview
    runs_waiting = JudgeRun.objects.filter(episode__study=study, status=JudgeRun.Status.WAITING).count()
    assert runs_waiting > 1
    assert f"waiting for configuration or budget {runs_waiting}" in overview
    # The sector table counts the study's tasks and, separately, its episodes.
    assert ">Tasks</th>" in overview and ">Episodes</th>" in overview
    table = overview[overview.index("<caption>Episodes by task sector</caption>"):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<th scope="row">[^<]+</th><td class="num">(\d+)</td><td class="num">(\d+)</td>', table)
    assert sum(int(tasks) for tasks, _ in rows) == counts.tasks
    assert sum(int(episodes) for _, episodes in rows) == counts.episodes

"""HTTP flow of the honest parts of the task page: where a task comes from (own occupation, own field or a
related one), the "outside my expertise" skip and its pay rule, landing back at a refused field, form
addresses that can be reloaded, and experience given in half years like the pre-survey asks."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from console.payouts import payout_rows
from studies import models as m
from tests.factories import OccupationFactory, SectorFactory, TaskFactory
from tests.factories.files import PNG, upload
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def related_world():
    """The worker's own sector has no task; the study falls back to a related sector that has three."""
    world = make_world(tasks=0)
    related = SectorFactory(code="pilot-engineering", name="Architecture and Engineering")
    for i in range(3):
        TaskFactory(title=f"Culvert sizing {i}", sector=related, studies=[world.study])
    m.SectorFallback.objects.create(study=world.study, from_sector=world.sector, to_sector=related, priority=1)
    return world


def _start(client, position=1) -> m.Episode:
    response = client.post(reverse("worker:task-start", args=["pilot", position]))
    assert response.status_code == 302, response.content[:500]
    return m.Episode.objects.get(participant__user_id=response.wsgi_request.user.pk, position=position)


def _login(client, world, **fields) -> m.Participant:
    participant = make_participant(world, **fields)
    client.force_login(participant.user)
    return participant


def test_a_task_from_a_fallback_sector_is_named_as_coming_from_a_related_field(client, related_world):
    _login(client, related_world)
    start_page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "from your field and" not in start_page and "from a related field" in start_page
    _start(client)
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "This task comes from a related field: Architecture and Engineering." in html
    assert f"Your occupation is in {related_world.sector.name}" in html
    assert 'id="outside-expertise" open' in html, "the honest skip is offered openly for a related-field task"


def test_a_task_for_the_workers_own_occupation_or_sector_says_so(client):
    world = make_world(tasks=1)
    other = OccupationFactory(soc_code="13-2099.00", title="Financial Specialists, All Other", sector=world.sector)
    world.tasks[0].occupations.add(world.occupation)
    _login(client, world)
    _start(client)
    assert "This task was written for your occupation." in client.get(
        reverse("worker:task", args=["pilot", 1])).content.decode()
    client.logout()
    _login(client, world, occupation=other)
    world.study.max_episodes_per_task = 5
    world.study.save(update_fields=["max_episodes_per_task"])
    _start(client)
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert f"This task is from your field ({world.sector.name}), though not written for your exact occupation" in html


def test_an_outside_expertise_skip_is_recorded_apart_from_setup_failures_and_unpaid_by_default(client, related_world):
    participant = _login(client, related_world)
    episode = _start(client)
    html = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "In this study such a skip is not paid." in html
    url = reverse("worker:episode-outside-expertise", args=[episode.pk])
    response = client.post(url, {"reason": "I supervise production lines; I have never sized a culvert.",
                                 "confirm": "1"})
    assert response.status_code == 302
    episode.refresh_from_db()
    assert (episode.status, episode.skip_reason) == (m.Episode.Status.SKIPPED, "outside_expertise")
    assert "never sized a culvert" in episode.skip_description
    assert not m.EpisodeFile.objects.filter(episode=episode).exists(), "no screenshots are asked for"
    assert not m.Payment.objects.filter(participant=participant).exists()
    assert m.AuditEvent.objects.filter(action="episode.skip_outside_expertise").count() == 1
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "This task was skipped as outside your expertise" in page


def test_a_study_that_pays_outside_expertise_skips_adds_the_task_rate_once_and_payouts_include_it(
        client, related_world):
    study = related_world.study
    study.pay_outside_expertise_skips = True
    study.compensation_per_task = Decimal("12.50")
    study.save(update_fields=["pay_outside_expertise_skips", "compensation_per_task"])
    participant = _login(client, related_world)
    episode = _start(client)
    assert "This study pays such a skip at the task rate (12.50" in client.get(
        reverse("worker:task", args=["pilot", 1])).content.decode()
    url = reverse("worker:episode-outside-expertise", args=[episode.pk])
    client.post(url, {"reason": "Outside my field: civil engineering hydraulics.", "confirm": "1"})
    again = client.post(url, {"reason": "Outside my field: civil engineering hydraulics.", "confirm": "1"})
    assert again.status_code in (302, 400, 409)
    lines = list(m.Payment.objects.filter(participant=participant))
    assert [(p.kind, p.amount, p.episode_id) for p in lines] == [("adjustment", Decimal("12.50"), episode.pk)]
    row = next(r for r in payout_rows(study) if r.participant_id == participant.pseudonym)
    assert (row.completed_tasks, row.adjustments) == (0, Decimal("12.50")), "a skip is not a completed task"


def test_the_outside_expertise_skip_needs_a_reason_and_a_confirmation(client, related_world):
    _login(client, related_world)
    episode = _start(client)
    url = reverse("worker:episode-outside-expertise", args=[episode.pk])
    empty = client.post(url, {})
    html = empty.content.decode()
    assert empty.status_code == 400
    assert "Please say why this task is outside your expertise." in html
    assert "Please tick the box to confirm" in html, "both problems are named on the first try"
    assert 'id="outside-expertise-reason" name="reason" rows="3" required aria-invalid="true"' in html
    assert f'data-url="{reverse("worker:task", args=["pilot", 1])}#outside-expertise"' in html
    episode.refresh_from_db()
    assert episode.status != m.Episode.Status.SKIPPED


def test_an_empty_setup_failure_form_names_every_missing_part_at_once(client):
    world = make_world()
    _login(client, world)
    episode = _start(client)
    response = client.post(reverse("worker:episode-setup-failed", args=[episode.pk]), {})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Please describe what went wrong." in html
    assert "at least one screenshot" in html
    assert "confirm that this task should be skipped" in html
    done = client.post(reverse("worker:episode-setup-failed", args=[episode.pk]), {
        "description": "The installer stops with error 42.", "confirm": "1", "screenshots": [upload("s.png", PNG)]})
    assert done.status_code == 302


@pytest.mark.parametrize("name,section", [("episode-log", "log"), ("episode-setup", "setup"),
                                          ("episode-setup-failed", "setup-failed"),
                                          ("episode-outside-expertise", "outside-expertise")])
def test_opening_a_form_address_again_leads_back_to_its_section(client, name, section):
    world = make_world()
    _login(client, world)
    episode = _start(client)
    response = client.get(reverse(f"worker:{name}", args=[episode.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("worker:task", args=["pilot", 1]) + f"#{section}"
    assert client.put(reverse(f"worker:{name}", args=[episode.pk])).status_code == 405


def test_notes_over_the_limit_leave_the_section_marked_unsaved_and_the_checklist_open(client):
    world = make_world()
    _login(client, world)
    episode = _start(client)
    page = client.post(reverse("worker:episode-log", args=[episode.pk]), {"notes": "n" * 5001})
    html = page.content.decode()
    assert page.status_code == 400
    assert "Saved automatically as you type." not in html
    assert "Not saved: please correct the field marked above." in html
    assert 'data-need="log-form"' in html and 'id="submit-checklist" class="is-complete"' not in html
    assert 'aria-invalid="true" autofocus' in html, "the refused field is focused"
    assert f'data-url="{reverse("worker:task", args=["pilot", 1])}#log"' in html


def test_profile_experience_takes_whole_or_half_years_like_the_pre_survey(client):
    world = make_world()
    participant = _login(client, world, status=m.Participant.Status.CONSENTED, occupation=None)
    url = reverse("worker:profile", args=["pilot"])
    odd = client.post(url, {"occupation": world.occupation.pk, "years_experience": "3.3"})
    assert odd.status_code == 200 and b"Enter whole or half years, for example 4 or 2.5." in odd.content
    ok = client.post(url, {"occupation": world.occupation.pk, "years_experience": "3.5"})
    assert ok.status_code == 302
    participant.refresh_from_db()
    assert participant.years_experience == 3.5
    survey = client.get(reverse("worker:survey", args=["pilot", "pre"])).content.decode()
    assert 'value="3.5"' in survey, "the pre-survey's experience question starts from the profile's answer"


def test_a_search_that_finds_nothing_says_how_many_occupations_the_study_covers_and_lists_them(client):
    world = make_world(contact_email="team@example.org", contact_name="Dr. Contact")
    OccupationFactory(soc_code="13-2051.00", title="Financial Analysts", sector=world.sector)
    OccupationFactory(soc_code="45-2092.00", title="Farmworkers", sector=SectorFactory(code="farming"))
    _login(client, world, status=m.Participant.Status.CONSENTED, occupation=None)
    url = reverse("worker:profile", args=["pilot"])
    first = client.get(url).content.decode()
    assert "This study covers <strong>2 occupations</strong>" in first and 'id="occupation-browse"' not in first
    page = client.get(url, {"q": "farmer"}).content.decode()
    assert "No occupation in this study matches “farmer”. It covers 2 occupations" in page
    browse = page.split('id="occupation-browse"')[1]
    assert "Accountants and Auditors" in browse and "Financial Analysts" in browse
    assert "Farmworkers" not in browse, "only occupations the study can give tasks to are offered"
    assert "team@example.org" in browse
    chosen = client.post(url, {"occupation": m.Occupation.objects.get(title="Financial Analysts").pk,
                               "years_experience": "2"})
    assert chosen.status_code == 302


def test_the_overview_says_pay_is_recorded_until_it_is_paid_out(client):
    from django.utils import timezone

    from tests.factories import EpisodeFactory

    world = make_world()
    participant = _login(client, world)
    episodes = [EpisodeFactory(participant=participant, study=world.study, task=world.tasks[i], position=i + 1,
                               status=m.Episode.Status.SUBMITTED) for i in range(2)]
    lines = [m.Payment.objects.create(participant=participant, episode=e, kind="task", amount=Decimal("20"))
             for e in episodes]
    overview = lambda: client.get(reverse("worker:study", args=["pilot"])).content.decode()  # noqa: E731
    assert "pay recorded for 2 tasks, not paid out yet" in overview() and "paid for 2" not in overview()
    m.Payment.objects.filter(pk=lines[0].pk).update(paid_at=timezone.now())
    assert "pay recorded for 2 tasks: 1 paid out, 1 pending" in overview()
    m.Payment.objects.filter(pk=lines[1].pk).update(paid_at=timezone.now())
    assert "paid for 2 tasks" in overview()


def test_a_completed_participant_is_offered_no_resume_link(client):
    world = make_world()
    _login(client, world, status=m.Participant.Status.COMPLETE)
    page = client.get(reverse("worker:study", args=["pilot"])).content.decode()
    assert "You have completed the study" in page
    assert 'id="resume-link"' not in page and "come back with your resume link" not in page
    assert "Withdraw from the study" in page


def test_the_pre_survey_experience_question_keeps_the_same_half_year_rule():
    from studies.exceptions import SurveyAnswerInvalid
    from surveys.models import Question
    from surveys.services import answer_code, instrument_install_default

    d3 = Question.objects.get(instrument=instrument_install_default(), code="D3")
    assert answer_code(d3, "3.5") == ("3.5", 3.5)
    with pytest.raises(SurveyAnswerInvalid, match="whole or half years"):
        answer_code(d3, "3.3")


def test_a_plain_task_page_leaves_its_address_alone(client):
    world = make_world()
    _login(client, world)
    _start(client)
    assert 'id="page-address"' not in client.get(reverse("worker:task", args=["pilot", 1])).content.decode()


def test_paid_outside_expertise_skips_are_capped_per_worker_when_each_skip_is_replaced(client):
    """With `all_submitted` every skip is replaced by another task: without a cap, skipping is paid work."""
    world = make_world(tasks=8, post_survey_gate=m.Study.PostSurveyGate.ALL_SUBMITTED,
                       pay_outside_expertise_skips=True, compensation_per_task=Decimal("12.50"))
    assert world.study.max_paid_outside_expertise_skips == 2, "a sensible default cap"
    participant = _login(client, world)
    skipped = []
    for position in range(1, 5):  # each skip opens one more position, as the gate replaces it
        episode = _start(client, position=position)
        assert episode.status != m.Episode.Status.SKIPPED
        response = client.post(reverse("worker:episode-outside-expertise", args=[episode.pk]),
                               {"reason": "Outside my field: civil engineering hydraulics.", "confirm": "1"},
                               follow=True)
        assert response.status_code == 200
        skipped.append(episode.pk)
    page = response.content.decode()
    assert "It is not paid: this study pays at most 2 such skips per worker." in page
    lines = list(m.Payment.objects.filter(participant=participant).order_by("pk"))
    assert [(p.kind, p.amount, p.episode_id) for p in lines] == [
        ("adjustment", Decimal("12.50"), skipped[0]), ("adjustment", Decimal("12.50"), skipped[1])]
    audits = m.AuditEvent.objects.filter(action="episode.skip_outside_expertise").order_by("pk")
    assert [a.after["paid"] for a in audits] == [True, True, False, False]
    assert m.Episode.objects.filter(pk__in=skipped, status=m.Episode.Status.SKIPPED).count() == 4

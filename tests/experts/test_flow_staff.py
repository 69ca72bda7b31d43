"""Staff pages over HTTP: invitations, routing, gold checks, adjudication, metrics and the score source."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.urls import reverse

from experts.models import ExpertAssignment, ExpertProfile
from experts.services.grading import VerdictInput, grade_open, grade_submit
from studies.models import AuditEvent, Episode
from studies.roles import has_role
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode
from tests.tampering import tampered_link

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = UserFactory(roles=["staff"])
    client.force_login(user)
    return user


def _invite(client, sector) -> str:
    response = client.post(reverse("expert:staff_experts"), {"sectors": [sector.pk], "email": "ada@example.org"})
    assert response.status_code == 200
    match = re.search(r'value="(http://testserver/expert/invite/[^"]+)"', response.content.decode())
    assert match, "the page shows the invitation link"
    return match.group(1).replace("http://testserver", "")


def test_an_invited_expert_sets_up_an_account_with_the_chosen_sectors(client, staff, mailoutbox):
    sector = SectorFactory()
    link = _invite(client, sector)
    assert mailoutbox and link in mailoutbox[0].body
    client.logout()
    assert "Create my expert account" in client.get(link).content.decode()
    response = client.post(link, {"username": "ada", "email": "ada@example.org", "password1": "grading-rubrics-42",
                                  "password2": "grading-rubrics-42"})
    assert response.status_code == 302 and response.url == reverse("expert:home")
    user = get_user_model().objects.get(username="ada")
    assert has_role(user, "expert")
    assert list(user.expert_profile.sectors.all()) == [sector] and user.expert_profile.invited_by == staff
    assert client.get(reverse("expert:home")).status_code == 200  # signed in straight away


def test_an_invitation_works_only_once(client, staff):
    link = _invite(client, SectorFactory())
    client.logout()
    client.post(link, {"username": "ada", "password1": "grading-rubrics-42", "password2": "grading-rubrics-42"})
    client.logout()
    response = client.get(link)
    assert response.status_code == 400 and "already been used" in response.content.decode()
    response = client.post(link, {"username": "bob", "password1": "grading-rubrics-42",
                                  "password2": "grading-rubrics-42"})
    assert response.status_code == 400
    assert not get_user_model().objects.filter(username="bob").exists()


def test_an_expired_or_altered_invitation_is_refused(client, staff, monkeypatch):
    link = _invite(client, SectorFactory())
    client.logout()
    assert client.get(tampered_link(link)).status_code == 400
    now = time.time()
    monkeypatch.setattr(signing.time, "time", lambda: now + 15 * 24 * 3600)
    response = client.get(link)
    assert response.status_code == 400 and "expired" in response.content.decode()


def test_a_weak_password_is_refused_with_the_reason(client, staff):
    link = _invite(client, SectorFactory())
    client.logout()
    response = client.post(link, {"username": "ada", "password1": "123", "password2": "123"})
    assert response.status_code == 200 and "too short" in response.content.decode()
    assert not get_user_model().objects.filter(username="ada").exists()


def test_route_now_assigns_waiting_episodes(client, staff):
    sector = SectorFactory()
    expert = make_expert(sectors=[sector])
    study = StudyFactory(double_grading_share=0.0)
    episode = make_episode(sector=sector, study=study)
    response = client.post(reverse("expert:staff_routing"), {"action": "route", "study": study.pk})
    assert response.status_code == 302
    assert episode.expert_assignments.get().expert == expert


def test_the_double_grading_share_is_set_from_the_routing_page(client, staff):
    study = StudyFactory()
    client.post(reverse("expert:staff_routing"), {"action": "share", "study": study.pk, "share": "0.35"})
    study.refresh_from_db()
    assert study.double_grading_share == 0.35


def test_staff_plant_a_gold_copy_from_a_graded_episode(client, staff):
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)
    source = make_episode(task=task, study=StudyFactory())
    EpisodeFileFactory(episode=source, csv=True)
    expert = make_expert(sectors=[sector])
    assert client.get(reverse("expert:staff_gold_plant", args=[source.pk])).status_code == 200
    response = client.post(reverse("expert:staff_gold_plant", args=[source.pk]),
                           {"answer_C1": "pass", "answer_C2": "fail", "experts": [expert.pk]})
    assert response.status_code == 302
    copy = Episode.objects.get(is_gold=True)
    assert copy.gold_verdicts == {"C1": "pass", "C2": "fail"}
    assert copy.expert_assignments.get().expert == expert


def _grade(assignment, verdicts, overall):
    grade = grade_open(assignment=assignment, user=assignment.expert.user)
    answers = {c.pk: VerdictInput(v, "wrong" if v == "fail" else "")
               for c, v in zip(grade.rubric.criteria.order_by("order"), verdicts, strict=True)}
    return grade_submit(grade=grade, user=assignment.expert.user, verdicts=answers, overall=overall)


def test_a_disagreement_goes_to_staff_adjudication_and_decides_the_score(client, staff, sent_tasks):
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)
    episode = make_episode(task=task, study=StudyFactory())
    a = ExpertAssignment.objects.create(episode=episode, expert=make_expert(sectors=[sector]))
    b = ExpertAssignment.objects.create(episode=episode, expert=make_expert(sectors=[sector]),
                                        role=ExpertAssignment.Role.SECOND)
    _grade(a, ["pass"] * 5, "accept")
    _grade(b, ["fail", "fail", "pass", "pass", "pass"], "reject")
    page = client.get(reverse("expert:staff_adjudication")).content.decode()
    assert "overall judgement" in page and "completion differs" in page
    response = client.post(reverse("expert:staff_adjudicate", args=[episode.pk]), {"adjudicator": ""})
    assignment = ExpertAssignment.objects.get(episode=episode, role=ExpertAssignment.Role.ADJUDICATION)
    assert response.status_code == 302 and response.url == reverse("expert:grade", args=[assignment.pk])
    assert client.get(response.url).status_code == 200  # staff grade under their own profile
    _grade(assignment, ["pass", "fail", "pass", "pass", "pass"], "revise")
    episode.refresh_from_db()
    assert episode.expert_score == 80.0


def test_the_metrics_page_reports_agreement_numbers(client, staff, sent_tasks):
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)
    study = StudyFactory()
    scores = [(["pass"] * 5, 90.0), (["pass", "fail", "pass", "fail", "pass"], 70.0), (["fail"] * 5, 40.0)]
    for verdicts, auto in scores:
        episode = make_episode(task=task, study=study, auto_score=auto)
        expert = make_expert(sectors=[sector])
        _grade(ExpertAssignment.objects.create(episode=episode, expert=expert), verdicts, "accept")
    page = client.get(reverse("expert:staff_metrics") + f"?study={study.pk}").content.decode()
    # Expert scores 100, 60, 0 = 2 × automated (90, 70, 40) − 80: a perfect linear relation, r = 1.
    assert re.search(r'id="pearson-r">1\.000<', page)
    assert 'id="score-source-form"' in page


def test_staff_switch_the_score_source_from_the_metrics_page(client, staff, sent_tasks,
        django_capture_on_commit_callbacks):
    study = StudyFactory()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("expert:staff_score_source", args=[study.pk]),
                               {"source": "expert", "blend_expert_weight": "0.5"})
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.score_source == "expert"
    assert sent_tasks == [("rating.tasks.rerecord_study", [study.pk])]
    assert AuditEvent.objects.filter(action="study.score_source", actor=staff).exists()


def test_staff_pause_an_expert(client, staff):
    expert = make_expert(sectors=[SectorFactory()])
    client.post(reverse("expert:staff_expert_edit", args=[expert.pk]), {"sectors": []})
    expert.refresh_from_db()
    assert not expert.is_active and expert.sectors.count() == 0
    assert ExpertProfile.objects.get(pk=expert.pk).is_active is False


def test_staff_send_a_submitted_episode_to_an_expert_by_name_without_automated_grading(client, staff):
    sector, other_sector = SectorFactory(), SectorFactory()
    chosen = make_expert(username="grace", sectors=[other_sector])
    second = make_expert(username="linus", sectors=[sector])
    episode = make_episode(sector=sector, status=Episode.Status.SUBMITTED)
    page = client.get(reverse("expert:staff_episode", args=[episode.pk])).content.decode()
    assert "Assign for grading" in page and f"grace ({other_sector.name})" in page

    response = client.post(reverse("expert:staff_assign", args=[episode.pk]), {"expert": chosen.pk})
    assert response.status_code == 302
    assignment = episode.expert_assignments.get()
    assert (assignment.expert, assignment.role, assignment.assigned_by) == (chosen, "primary", staff)
    assert AuditEvent.objects.filter(action="episode.expert_assign", object_id=str(episode.pk)).exists()

    client.post(reverse("expert:staff_assign", args=[episode.pk]), {"expert": second.pk})
    assert episode.expert_assignments.get(expert=second).role == "second"
    again = client.post(reverse("expert:staff_assign", args=[episode.pk]), {"expert": chosen.pk}, follow=True)
    assert b"Choose an active expert" in again.content and episode.expert_assignments.count() == 2


def test_simulated_or_unsubmitted_episodes_cannot_be_sent_to_an_expert(client, staff):
    from experts.exceptions import RoutingError
    from experts.services.routing import episode_assign_expert

    expert = make_expert(sectors=[SectorFactory()])
    simulated = make_episode(status=Episode.Status.GRADED)
    Episode.objects.filter(pk=simulated.pk).update(is_simulated=True)
    simulated.refresh_from_db()
    with pytest.raises(RoutingError, match="Simulated episodes"):
        episode_assign_expert(episode=simulated, expert=expert, actor=staff)
    open_episode = make_episode(status=Episode.Status.IN_PROGRESS)
    with pytest.raises(RoutingError, match="Only submitted episodes"):
        episode_assign_expert(episode=open_episode, expert=expert, actor=staff)
    assert b"Only submitted episodes can be sent" in client.get(
        reverse("expert:staff_episode", args=[open_episode.pk])).content

"""Who may open what in the expert workspace: others' objects are 404, and grading stays blind."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experts.models import ExpertAssignment
from experts.services.grading import VerdictInput, grade_open, grade_submit
from grading.models import Rubric
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.agents import AgentFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db

STAFF_PAGES = [
    ("expert:staff_experts", {}), ("expert:staff_invite", {}), ("expert:staff_rubrics", {}),
    ("expert:staff_routing", {}), ("expert:staff_gold", {}), ("expert:staff_adjudication", {}),
    ("expert:staff_metrics", {}), ("expert:staff_tom_gold", {}),
]


@pytest.fixture
def world():
    sector = SectorFactory()
    task = TaskFactory(sector=sector, hidden_info="Reference total: 1,234,567.")
    rubric = make_rubric(task)
    episode = make_episode(task=task, study=StudyFactory(),
                           agent=AgentFactory(name="Secret Agent X", model_version="sx-9000"), auto_score=63.7)
    delivered = EpisodeFileFactory(episode=episode, csv=True)
    mine, theirs = make_expert(username="mine", sectors=[sector]), make_expert(username="theirs", sectors=[sector])
    my_assignment = ExpertAssignment.objects.create(episode=episode, expert=mine)
    their_assignment = ExpertAssignment.objects.create(episode=episode, expert=theirs,
                                                       role=ExpertAssignment.Role.SECOND)
    return {"sector": sector, "task": task, "rubric": rubric, "episode": episode, "file": delivered, "mine": mine,
            "theirs": theirs, "my_assignment": my_assignment, "their_assignment": their_assignment}


def _submit(assignment, feedback="OTHER-EXPERT-FEEDBACK"):
    grade = grade_open(assignment=assignment, user=assignment.expert.user)
    verdicts = {c.pk: VerdictInput("fail", feedback) for c in grade.rubric.criteria.all()}
    return grade_submit(grade=grade, user=assignment.expert.user, verdicts=verdicts, overall="reject")


def test_anonymous_visitors_are_sent_to_sign_in(client, world):
    for url in (reverse("expert:home"), reverse("expert:grade", args=[world["my_assignment"].pk])):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_workers_get_404_everywhere_in_the_workspace(client, world):
    client.force_login(UserFactory(roles=["worker"]))
    assert client.get(reverse("expert:home")).status_code == 404
    assert client.get(reverse("expert:grade", args=[world["my_assignment"].pk])).status_code == 404
    assert client.get(reverse("expert:task_detail", args=[world["task"].pk])).status_code == 404


def test_an_expert_cannot_reach_another_experts_assignment(client, world):
    client.force_login(world["mine"].user)
    theirs = world["their_assignment"].pk
    assert client.get(reverse("expert:grade", args=[theirs])).status_code == 404
    assert client.post(reverse("expert:grade_autosave", args=[theirs]), data="{}",
                       content_type="application/json").status_code == 404
    assert client.get(reverse("expert:grade_file", args=[theirs, world["file"].pk])).status_code == 404
    assert client.get(reverse("expert:grade", args=[world["my_assignment"].pk])).status_code == 200


def test_a_deliverable_of_another_episode_is_not_reachable_through_my_assignment(client, world):
    other = make_episode(sector=world["sector"])
    stranger_file = EpisodeFileFactory(episode=other, csv=True, name="other.csv")
    client.force_login(world["mine"].user)
    url = reverse("expert:grade_file", args=[world["my_assignment"].pk, stranger_file.pk])
    assert client.get(url).status_code == 404


def test_tasks_outside_the_experts_domains_are_404(client, world):
    outside = TaskFactory(sector=SectorFactory())
    client.force_login(world["mine"].user)
    assert client.get(reverse("expert:task_detail", args=[outside.pk])).status_code == 404
    assert client.post(reverse("expert:rubric_start", args=[outside.pk])).status_code == 404
    assert client.get(reverse("expert:task_detail", args=[world["task"].pk])).status_code == 200


def test_other_experts_drafts_are_404_but_approved_rubrics_are_shared(client, world):
    draft = make_rubric(world["task"], status=Rubric.Status.DRAFT, origin=Rubric.Origin.EXPERT,
                        author=world["theirs"].user)
    client.force_login(world["mine"].user)
    assert client.get(reverse("expert:rubric_detail", args=[draft.pk])).status_code == 404
    assert client.get(reverse("expert:rubric_edit", args=[draft.pk])).status_code == 404
    assert client.get(reverse("expert:rubric_detail", args=[world["rubric"].pk])).status_code == 200


@pytest.mark.parametrize(("name", "kwargs"), STAFF_PAGES)
def test_staff_pages_are_404_for_experts(client, world, name, kwargs):
    client.force_login(world["mine"].user)
    assert client.get(reverse(name, kwargs=kwargs)).status_code == 404


@pytest.mark.parametrize(("name", "kwargs"), STAFF_PAGES)
def test_staff_pages_open_for_staff(client, world, name, kwargs):
    client.force_login(UserFactory(roles=["staff"]))
    assert client.get(reverse(name, kwargs=kwargs)).status_code == 200


def test_paused_experts_lose_access(client, world):
    world["mine"].is_active = False
    world["mine"].save()
    client.force_login(world["mine"].user)
    assert client.get(reverse("expert:grade", args=[world["my_assignment"].pk])).status_code == 404
    assert "paused" in client.get(reverse("expert:home")).content.decode()


def test_grading_is_blind_until_the_expert_submits(client, world):
    _submit(world["their_assignment"])  # another expert already graded the same episode
    client.force_login(world["mine"].user)
    page = client.get(reverse("expert:grade", args=[world["my_assignment"].pk])).content.decode()
    for secret in ("Secret Agent X", "sx-9000", "63.7", "OTHER-EXPERT-FEEDBACK", "theirs", "gold"):
        assert secret not in page
    assert "| month | revenue |" in page  # the deliverable itself is shown, as extracted

    _submit(world["my_assignment"], feedback="MY-FEEDBACK")
    after = client.get(reverse("expert:grade", args=[world["my_assignment"].pk])).content.decode()
    assert "Secret Agent X" in after and "63.7" in after and "OTHER-EXPERT-FEEDBACK" in after


def test_a_gold_copy_looks_like_any_other_submission(client, world):
    from experts.services.routing import gold_plant

    taster = make_expert(username="taster", sectors=[world["sector"]])
    copy = gold_plant(source=world["episode"], answers={"C1": "pass"}, experts=[taster],
                      actor=UserFactory(roles=["staff"]))
    client.force_login(taster.user)
    assignment = copy.expert_assignments.get()
    home = client.get(reverse("expert:home")).content.decode()
    page = client.get(reverse("expert:grade", args=[assignment.pk])).content.decode()
    assert "gold" not in home.lower() and "gold" not in page.lower()
    assert "Secret Agent X" not in page


def test_a_worker_opening_the_workspace_gets_a_plain_page_not_the_technical_404(client, world, settings):
    settings.DEBUG = True  # as under ``make run``, where a raised 404 would show Django's technical page
    client.force_login(UserFactory(roles=["worker"]))
    response = client.get(reverse("expert:home"))
    html = response.content.decode()
    assert response.status_code == 404
    assert "This page is not open to your account" in html and "your tasks are on your study page" in html
    assert "Using the URLconf" not in html and "technical_404" not in html

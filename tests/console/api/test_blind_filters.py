"""No role but staff can narrow or order a list by anything its own pages hide.

The walk is derived from the filter sets themselves: every parameter of every filter set a scoped endpoint
knows (the staff set and each role's), tried with every value the data holds for it, so a filter added later
is covered without editing this file. A parameter a role may use must be in ``SHOWN``, the blinding rules
written down: what that role's own pages show (a worker: their study and their own progress; an expert: the
study and the task of an assignment, and their own grades).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import models
from django.http import QueryDict

from console.api.filters import RoleFilterBackend, scoped_filterset
from console.api.permissions import visible_episodes, visible_expert_grades, visible_participants
from console.api.urls import router
from studies import models as m
from studies.roles import EXPERT, WORKER
from tests.console.api.conftest import World, client_for
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, TaskFactory
from tests.factories.experts import ExpertAssignmentFactory, ExpertGradeFactory
from tests.factories.grading import make_rubric

SHOWN = {
    WORKER: {"participants": {"study", "status"}, "episodes": {"study", "status"}},
    EXPERT: {"episodes": {"study", "task"},
             "expert-grades": {"episode", "study", "expert", "status", "overall"}},
}
# Parameters no filter set declares but a list endpoint could one day honour (ordering and search backends).
ORDERING_PARAMETERS = {"ordering": ["agent", "-agent", "score", "-score", "status", "-needs_expert_review"],
                       "o": ["agent", "-score"], "search": ["claude", "codex"]}
VISIBLE = {"episodes": visible_episodes, "participants": visible_participants, "expert-grades": visible_expert_grades}

SCOPED = [(prefix, viewset) for prefix, viewset, _ in router.registry if getattr(viewset, "scoped_roles", ())]


@pytest.fixture
def crowded(world: World) -> World:
    """Give the worker and the expert a second row that differs from the first in every hidden attribute."""
    ParticipantFactory(study=world.other_study, user=world.worker, occupation=world.occupation,
                       status=m.Participant.Status.WITHDRAWN, is_simulated=True)
    codex = AgentFactory(slug="codex", name="Codex")
    codex.studies.add(world.study)
    EpisodeFactory(participant=world.participant, agent=codex, task=world.other_task, position=2,
                   status=m.Episode.Status.SUBMITTED, needs_expert_review=True, is_simulated=True)
    third_task = TaskFactory(title="Payroll check", sector=world.sector, studies=[world.study])
    flagged = EpisodeFactory(participant=world.other_participant, agent=codex, task=third_task, position=2,
                             status=m.Episode.Status.GRADING, needs_expert_review=True, score=12.0)
    gold = ExpertAssignmentFactory(episode=flagged, expert=world.expert.expert_profile,
                                   role="gold")
    ExpertGradeFactory(assignment=gold, rubric=make_rubric(third_task, rows=[("correctness", 40.0, "", "Sums.")]))
    return world


def _ids(response) -> list:
    assert response.status_code == 200, (response.status_code, response.content[:300])
    return [row.get("id", row.get("pseudonym")) for row in response.json()["results"]]


def _field_values(model: type[models.Model], field_name: str) -> list[str]:
    """Every value the rows hold at a filter's field path, as a query string would carry it."""
    try:
        values = set(model.objects.values_list(field_name, flat=True))
    except Exception:  # a method filter whose name is no field path
        return []
    found = []
    for value in values - {None}:
        if isinstance(value, dt.datetime):
            found += [value.isoformat(), (value + dt.timedelta(seconds=1)).isoformat()]
        elif isinstance(value, bool):
            found.append("true" if value else "false")
        else:
            found.append(str(value))
    return found


def _candidates(filterset: type, name: str) -> list[str]:
    """Values worth trying for one filter: its choices, both booleans, what the data holds, and a stranger."""
    declared = filterset.base_filters[name]
    values = [str(choice) for choice, _ in declared.extra.get("choices", ())]
    values += ["true", "false", str(uuid.uuid4()), "no-such-value", "2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"]
    return values + _field_values(filterset._meta.model, declared.field_name)


def _parameters(viewset: Any) -> dict[str, list[str]]:
    """Every parameter any filter set of the endpoint declares, with the values to try."""
    sets = [viewset.filterset_class, *getattr(viewset, "role_filtersets", {}).values()]
    found: dict[str, list[str]] = {name: list(values) for name, values in ORDERING_PARAMETERS.items()}
    for filterset in filter(None, sets):
        for name in filterset.base_filters:
            found.setdefault(name, []).extend(_candidates(filterset, name))
    return found


def _user(world: World, role: str):
    return world.worker if role == WORKER else world.expert


@pytest.mark.parametrize(("prefix", "viewset"), SCOPED, ids=[prefix for prefix, _ in SCOPED])
@pytest.mark.parametrize("role", [WORKER, EXPERT])
def test_no_scoped_role_narrows_a_list_by_what_its_pages_hide(crowded: World, prefix, viewset, role):
    if role not in viewset.scoped_roles:
        pytest.skip(f"{prefix} does not serve the {role} role")
    client, path = client_for(_user(crowded, role)), f"/api/{prefix}/"
    unfiltered = _ids(client.get(path))
    assert len(unfiltered) >= 2, "the role must see two rows, or narrowing cannot be seen"
    leaks = []
    for name, values in _parameters(viewset).items():
        if name in SHOWN[role].get(prefix, set()):
            continue
        for value in values:
            response = client.get(path, {name: value})
            if response.status_code != 200 or _ids(response) != unfiltered:
                leaks.append((name, value, response.status_code))
    assert leaks == [], f"{role} narrows or reorders {path} by hidden attributes"


@pytest.mark.parametrize(("prefix", "viewset"), SCOPED, ids=[prefix for prefix, _ in SCOPED])
@pytest.mark.parametrize("role", [WORKER, EXPERT])
def test_each_role_gets_a_filter_set_of_only_what_its_pages_show(crowded: World, prefix, viewset, role, rf):
    if role not in viewset.scoped_roles:
        pytest.skip(f"{prefix} does not serve the {role} role")
    view = viewset()
    view.request = rf.get("/")
    view.request.user = _user(crowded, role)
    filterset = scoped_filterset(view, view.request.user)
    assert set(filterset.base_filters if filterset else ()) <= SHOWN[role].get(prefix, set())
    assert all(issubclass(backend, RoleFilterBackend) for backend in view.filter_backends), \
        "an ordering or search backend would need its own blinding rules"


def test_the_walk_would_see_a_leak_the_staff_filters_make(crowded: World):
    """The staff set on the expert's own rows does narrow by agent, status and review flag: the data can tell."""
    from console.api.filters import EpisodeFilter

    mine = visible_episodes(crowded.expert, m.Episode.objects.all())
    viewset = dict(SCOPED)["episodes"]
    narrowing = {
        name for name, values in _parameters(viewset).items()
        if name in EpisodeFilter.base_filters and name not in SHOWN[EXPERT]["episodes"]
        for value in values
        if (filterset := EpisodeFilter(QueryDict(urlencode({name: value})), queryset=mine)).is_valid()
        and filterset.qs.count() < mine.count()
    }
    assert {"agent", "status", "needs_expert_review", "participant"} <= narrowing


def test_a_worker_status_filter_groups_every_grading_state_as_submitted(crowded: World):
    worker = client_for(crowded.worker)
    submitted = _ids(worker.get("/api/episodes/", {"status": "submitted"}))
    assert len(submitted) == 2  # one graded, one submitted: the filter cannot tell them apart
    assert worker.get("/api/episodes/", {"status": "graded"}).status_code == 400


def test_an_expert_reading_their_grade_is_not_told_its_role(crowded: World):
    row = client_for(crowded.expert).get("/api/expert-grades/").json()["results"][0]
    assert "role" not in row
    episode = client_for(crowded.expert).get("/api/episodes/").json()["results"][0]
    assert "status" not in episode and "agent" not in episode and "needs_expert_review" not in episode

"""Switching a study's score source re-records the ledger, and the rating stays exact."""

from __future__ import annotations

import random

import pytest

from experts.exceptions import ExpertError
from experts.services.score_source import study_set_score_source
from rating.engine import RatingConfig, SkillModel
from rating.models import EntityRating, Observation
from rating.services.ledger import observation_record, study_rerecord
from rating.services.refresh import posterior_refresh
from studies.models import AuditEvent, Study
from tests.factories import AgentFactory, ParticipantFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db


def test_switching_is_audited_and_asks_the_rating_to_rerecord_after_commit(sent_tasks,
        django_capture_on_commit_callbacks):
    study = StudyFactory()
    staff = UserFactory(roles=["staff"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert study_set_score_source(study=study, source="blended", actor=staff, blend_expert_weight=0.3)
    assert sent_tasks == []  # nothing is queued before the commit
    for callback in callbacks:
        callback()
    assert sent_tasks == [("rating.tasks.rerecord_study", [study.pk])]
    study.refresh_from_db()
    assert (study.score_source, study.blend_expert_weight) == ("blended", 0.3)
    event = AuditEvent.objects.get(action="study.score_source", object_id=str(study.pk))
    assert event.before["score_source"] == "auto" and event.after == {"score_source": "blended",
                                                                      "blend_expert_weight": 0.3}


def test_choosing_the_current_source_changes_nothing(sent_tasks,
        django_capture_on_commit_callbacks):
    study = StudyFactory()
    with django_capture_on_commit_callbacks(execute=True):
        assert not study_set_score_source(study=study, source="auto", actor=UserFactory(roles=["staff"]))
    assert sent_tasks == [] and not AuditEvent.objects.filter(action="study.score_source").exists()


@pytest.mark.parametrize(("source", "weight"), [("nonsense", None), ("blended", 1.5)])
def test_bad_sources_and_weights_are_refused(source, weight):
    study = StudyFactory()
    with pytest.raises(ExpertError):
        study_set_score_source(study=study, source=source, actor=None, blend_expert_weight=weight)
    study.refresh_from_db()
    assert study.score_source == "auto"


def _expected_y(episode, source, weight):
    auto, expert = episode.auto_score, episode.expert_score
    if source == "auto":
        return auto
    if source == "expert":
        return expert
    if auto is not None and expert is not None:
        return weight * expert + (1 - weight) * auto
    return expert if expert is not None else auto


def _fresh_model(study, episodes):
    """Batch solution over the expected y, added in a shuffled order (order must not matter)."""
    model = SkillModel(config=RatingConfig(mu0=study.rating_mu0, sigma0=study.rating_sigma0,
                                           beta=study.rating_beta, k=study.rating_k))
    rows = [(str(e.agent_id), str(e.participant_id), _expected_y(e, study.score_source, study.blend_expert_weight))
            for e in episodes]
    rows = [r for r in rows if r[2] is not None]
    random.Random(7).shuffle(rows)
    for agent_id, human_id, y in rows:
        model.add_observation(agent_id, human_id, y)
    return model, len(rows)


def _assert_snapshot_matches(study, episodes):
    snapshot = posterior_refresh(study_id=study.pk)
    model, n = _fresh_model(study, episodes)
    assert snapshot.n_observations == n == Observation.objects.filter(study=study, active=True).count()
    stored = {(r.entity_kind, str(r.entity_id)): (r.mu, r.sigma)
              for r in EntityRating.objects.filter(snapshot=snapshot)}
    expected = {(row["entity_type"], row["entity_id"]): (row["mu"], row["sigma"]) for row in model.leaderboard()}
    assert stored.keys() == expected.keys()
    for key, (mu, sigma) in expected.items():
        assert stored[key][0] == pytest.approx(mu, abs=1e-9)
        assert stored[key][1] == pytest.approx(sigma, abs=1e-9)
    return stored


def test_switching_the_score_source_keeps_the_rating_exact(sent_tasks):
    study = StudyFactory(rating_model="paper", rating_sigma0=10.0, rating_beta=5.0)
    agents = [AgentFactory() for _ in range(3)]
    participants = [ParticipantFactory(study=study) for _ in range(6)]
    rng = random.Random(11)
    episodes = []
    for i in range(18):
        expert = round(rng.uniform(0, 100), 2) if i % 3 else None  # a third has no expert grade yet
        auto = None if i == 5 else round(rng.uniform(0, 100), 2)  # one has only an expert grade
        episodes.append(make_episode(task=TaskFactory(), participant=participants[i % 6], agent=agents[i % 3],
                                     auto_score=auto, expert_score=expert))
    staff = UserFactory(roles=["staff"])
    for episode in episodes:
        observation_record(episode_id=episode.pk)
    by_auto = _assert_snapshot_matches(study, episodes)

    for source, weight in (("expert", None), ("blended", 0.25), ("auto", None)):
        assert study_set_score_source(study=study, source=source, actor=staff, blend_expert_weight=weight)
        study_rerecord(study_id=study.pk)  # what rating.tasks.rerecord_study runs
        study = Study.objects.get(pk=study.pk)
        stored = _assert_snapshot_matches(study, episodes)
        active = Observation.objects.filter(study=study, active=True)
        assert all(o.source in (source, "auto", "expert") for o in active)

    # Back on automated scores, the rating is the one we started from.
    assert stored.keys() == by_auto.keys()
    for key, (mu, sigma) in by_auto.items():
        assert stored[key] == (pytest.approx(mu, abs=1e-12), pytest.approx(sigma, abs=1e-12))

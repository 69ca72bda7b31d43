"""Database constraints that protect the research data (run on PostgreSQL in CI)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from rating.models import Observation
from studies.models import Episode, ParticipantIdentity, Payment, SectorFallback
from tests.conftest import requires_postgres
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, SectorFactory, TaskFactory

pytestmark = pytest.mark.django_db


def _fails(callable_) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        callable_()


@requires_postgres
def test_the_suite_really_runs_on_postgresql_when_services_are_configured():
    from django.db import connection

    assert connection.vendor == "postgresql"


def test_one_episode_per_participant_and_position():
    episode = EpisodeFactory(position=1)
    _fails(lambda: EpisodeFactory(participant=episode.participant, position=1))


def test_a_participant_never_gets_the_same_task_twice():
    episode = EpisodeFactory(position=1)
    _fails(lambda: EpisodeFactory(participant=episode.participant, task=episode.task, position=2))


def test_episode_scores_stay_within_zero_and_one_hundred():
    episode = EpisodeFactory()
    _fails(lambda: Episode.objects.filter(pk=episode.pk).update(score=100.5))
    _fails(lambda: Episode.objects.filter(pk=episode.pk).update(score=-1))
    Episode.objects.filter(pk=episode.pk).update(score=100)


def test_one_observation_per_episode():
    episode = EpisodeFactory()
    kwargs = {"study": episode.study, "episode": episode, "agent": episode.agent, "participant": episode.participant,
              "y": 50.0}
    Observation.objects.create(**kwargs)
    _fails(lambda: Observation.objects.create(**kwargs))


def test_observation_weights_must_be_positive():
    episode = EpisodeFactory()
    _fails(lambda: Observation.objects.create(study=episode.study, episode=episode, agent=episode.agent,
                                              participant=episode.participant, y=50.0, weight=0))


def test_one_participant_per_recruitment_platform_id_per_study():
    first = ParticipantFactory()
    ParticipantIdentity.objects.create(participant=first, study=first.study, platform="prolific",
                                       platform_worker_id="W1")
    second = ParticipantFactory(study=first.study)
    _fails(lambda: ParticipantIdentity.objects.create(participant=second, study=first.study, platform="prolific",
                                                      platform_worker_id="W1"))


def test_one_base_payment_per_episode():
    episode = EpisodeFactory()
    Payment.objects.create(participant=episode.participant, episode=episode, kind=Payment.Kind.TASK, amount=20)
    _fails(lambda: Payment.objects.create(participant=episode.participant, episode=episode, kind=Payment.Kind.TASK,
                                          amount=20))
    Payment.objects.create(participant=episode.participant, episode=episode, kind=Payment.Kind.BONUS, amount=50)


def test_a_sector_cannot_fall_back_to_itself():
    episode = EpisodeFactory()
    sector = SectorFactory()
    _fails(lambda: SectorFallback.objects.create(study=episode.study, from_sector=sector, to_sector=sector))


def test_a_task_cannot_be_deleted_while_episodes_use_it():
    from django.db.models import ProtectedError

    episode = EpisodeFactory(task=TaskFactory(), agent=AgentFactory())
    with pytest.raises(ProtectedError):
        episode.task.delete()


def test_the_same_task_can_be_planted_as_gold_twice_but_real_episodes_still_cannot_repeat_a_task():
    from experts.services.routing import gold_plant
    from tests.factories import StudyFactory, UserFactory
    from tests.factories.experts import make_expert
    from tests.factories.grading import make_rubric
    from tests.factories.scenarios import make_episode

    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)
    source = make_episode(task=task, study=StudyFactory(double_grading_share=0.0), expert_score=80.0)
    staff = UserFactory(roles=["staff"])
    first = gold_plant(source=source, answers={"C1": "pass"}, experts=[make_expert(sectors=[sector])], actor=staff)
    second = gold_plant(source=source, answers={"C1": "fail"}, experts=[make_expert(sectors=[sector])], actor=staff)

    assert first.participant == second.participant and first.task == second.task and first.pk != second.pk
    with pytest.raises(IntegrityError), transaction.atomic():
        EpisodeFactory(participant=source.participant, task=task, position=source.position + 1)


@pytest.mark.django_db(transaction=True)
def test_studies_that_existed_before_the_rating_model_keep_the_paper_model_and_new_ones_are_calibrated():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from studies.models import Study

    before, after = [("studyapp", "0006_pairing_design")], [("studyapp", "0007_study_rating_model_gold_copies")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_state = executor.loader.project_state(before).apps
    old = old_state.get_model("studyapp", "Study").objects.create(name="Old", slug="old-study", invite_code="old")
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert Study.objects.get(pk=old.pk).rating_model == "paper"
    assert Study.objects.create(name="New", slug="new-study").rating_model == "calibrated"


def test_the_study_rating_model_choices_are_the_models_the_rating_app_fits() -> None:
    from rating.fit import RATING_MODELS
    from studies.models import Study

    assert tuple(Study.RatingModel.values) == RATING_MODELS

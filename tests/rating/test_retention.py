"""Retention of superseded refits' participants' rating rows (rating/services/retention.py), by the command and by
the beat sweep when a study team asks for it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from rating import selectors
from rating.models import EntityRating, RatingSnapshot
from rating.services import ledger, live, refresh, retention
from studies.models import Episode, Study
from tests.factories import EpisodeFactory, TaskFactory
from tests.rating.ledger import assert_snapshot_matches_batch, ledger_study

pytestmark = pytest.mark.django_db


def _study_with_refits(refits: int, *, seed: int = 41) -> tuple[Study, list[RatingSnapshot]]:
    study, _, _, episodes = ledger_study(
        seed=seed, n_participants=8, per_participant=3, rating_model=Study.RatingModel.CALIBRATED
    )
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk, schedule_refresh=False)
    snapshots = [refresh.posterior_refresh(study_id=study.pk) for _ in range(refits)]
    return study, snapshots


def _age(snapshot: RatingSnapshot, hours: float) -> None:
    RatingSnapshot.objects.filter(pk=snapshot.pk).update(computed_at=timezone.now() - timedelta(hours=hours))


def _humans(snapshot: RatingSnapshot) -> int:
    return EntityRating.objects.filter(snapshot=snapshot, entity_kind="human").count()


def _agents(snapshot: RatingSnapshot) -> int:
    return EntityRating.objects.filter(snapshot=snapshot, entity_kind="agent").count()


def test_the_participants_rows_of_refits_older_than_the_kept_ones_go_and_the_rest_stays():
    study, (v1, v2, v3, v4) = _study_with_refits(4)
    other, (w1, w2) = _study_with_refits(2, seed=42)
    removed = retention.participant_rows_remove(keep=2, grace_seconds=0)
    assert [(item.study_id, item.version, item.rows) for item in removed] == [(study.pk, 1, 8), (study.pk, 2, 8)]
    for snapshot in (v1, v2):
        snapshot.refresh_from_db()
        assert _humans(snapshot) == 0 and _agents(snapshot) == 3  # the agents' rows and the fit stay
        assert snapshot.participants_removed_at is not None and snapshot.fit
    for snapshot in (v3, v4, w1, w2):
        snapshot.refresh_from_db()
        assert _humans(snapshot) == 8 and snapshot.participants_removed_at is None
    assert retention.participant_rows_remove(keep=2, grace_seconds=0) == []  # nothing twice
    assert_snapshot_matches_batch(selectors.latest_snapshot(study), study)


def test_a_refit_superseded_within_the_grace_period_keeps_its_rows():
    study, (v1, v2, v3) = _study_with_refits(3)
    assert retention.participant_rows_remove(keep=1, grace_seconds=3600) == []
    _age(v2, hours=2)  # v1 was superseded by v2 two hours ago; v2 by v3 just now
    removed = retention.participant_rows_remove(keep=1, grace_seconds=3600)
    assert [item.version for item in removed] == [1]
    assert _humans(v1) == 0 and _humans(v2) == 8 and _humans(v3) == 8


def test_live_updates_keep_showing_the_participants_of_the_refit_they_rest_on(settings):
    settings.RATING = {**settings.RATING, "LIVE_UPDATES": True, "LIVE_MIN_OBSERVATIONS": 0,
                       "REML_INTERVAL_SECONDS": 3600.0, "LIVE_DRIFT_ALPHA": 1e-12}
    study, (v1, v2) = _study_with_refits(2)
    first = Episode.objects.filter(study=study).order_by("pk").first()
    episode = EpisodeFactory(participant=first.participant, study=study, agent=first.agent,
                             task=TaskFactory(studies=[study]), position=9, status=Episode.Status.GRADED,
                             auto_score=77.0)
    ledger.observation_record(episode_id=episode.pk, schedule_refresh=False)
    update = live.posterior_update(study_id=study.pk)
    assert update.produced_by == RatingSnapshot.ProducedBy.UPDATE and update.base_id == v2.pk
    # Even asked to keep none but the latest, the refit the live updates rest on keeps its rows.
    removed = retention.participant_rows_remove(keep=1, grace_seconds=0)
    assert [item.version for item in removed] == [1]
    assert selectors.snapshot_ratings(update, EntityRating.Kind.HUMAN).count() == 8


def test_a_dry_run_deletes_nothing_and_bad_arguments_are_refused():
    study, (v1, v2) = _study_with_refits(2)
    (item,) = retention.participant_rows_remove(keep=1, grace_seconds=0, dry_run=True)
    assert (item.version, item.rows) == (1, 8) and _humans(v1) == 8
    v1.refresh_from_db()
    assert v1.participants_removed_at is None
    with pytest.raises(ValueError, match="keep"):
        retention.participant_rows_remove(keep=0, grace_seconds=0)
    with pytest.raises(ValueError, match="grace_seconds"):
        retention.participant_rows_remove(keep=1, grace_seconds=-1)


def test_the_command_lists_or_deletes_and_names_bad_arguments():
    from io import StringIO

    study, (v1, v2, v3) = _study_with_refits(3)
    out = StringIO()
    call_command("remove_participant_ratings", "--keep", "1", "--grace-seconds", "0", "--dry-run", stdout=out)
    assert "refit v1" in out.getvalue() and "would delete 16 rows of 2 refits" in out.getvalue()
    assert _humans(v1) == 8
    out = StringIO()
    call_command("remove_participant_ratings", "--keep", "2", "--study", study.slug, "--grace-seconds", "0",
                 stdout=out)
    assert "deleted 8 rows of 1 refits" in out.getvalue()
    assert _humans(v1) == 0 and _humans(v2) == 8
    with pytest.raises(CommandError, match="keep"):
        call_command("remove_participant_ratings", "--keep", "0")
    with pytest.raises(CommandError, match="no study"):
        call_command("remove_participant_ratings", "--keep", "1", "--study", "no-such-study")


def test_the_sweep_removes_rows_only_when_the_study_team_asked_and_a_few_refits_at_a_time(settings):
    study, snapshots = _study_with_refits(5)
    refresh.posteriors_refresh_stale()
    assert all(_humans(snapshot) == 8 for snapshot in snapshots)  # the default keeps everything
    settings.RATING = {**settings.RATING, "KEEP_PARTICIPANT_REFITS": 2, "RETENTION_GRACE_SECONDS": 0.0,
                       "RETENTION_PER_SWEEP": 2}
    refresh.posteriors_refresh_stale()
    assert [_humans(snapshot) for snapshot in snapshots] == [0, 0, 8, 8, 8]
    refresh.posteriors_refresh_stale()
    assert [_humans(snapshot) for snapshot in snapshots] == [0, 0, 0, 8, 8]

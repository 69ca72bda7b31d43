"""A refit killed after its participants' rows were committed on connections of their own: nobody intervenes,
and a worker run as `make run` runs it (with beat) deletes the rows and refits the study."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from rating.models import EntityRating, PendingRatingRows, RatingSnapshot
from rating.services import ledger
from studies.models import Study
from tests.conftest import ROOT, WorkerProcess, requires_postgres, requires_redis, wait_for, worker_environment
from tests.rating.ledger import latest_matches_batch, ledger_study


def _recovered(study: Study, orphan: int) -> bool:
    if EntityRating.objects.filter(snapshot_id=orphan).exists() or PendingRatingRows.objects.exists():
        return False
    return latest_matches_batch(study)


@requires_postgres
@requires_redis
@pytest.mark.django_db(transaction=True)
def test_a_refit_killed_after_its_streams_committed_is_cleaned_up_and_redone_by_the_beat_sweep(tmp_path):
    from studyapp.celery import app

    app.control.purge()
    study, _, _, episodes = ledger_study(
        seed=31, n_participants=14, per_participant=4, rating_model=Study.RatingModel.CALIBRATED
    )
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    written = tmp_path / "written"
    env = worker_environment()
    child = subprocess.Popen([sys.executable, "-m", "tests.rating.refit_child", str(study.pk), str(written)],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: written.exists() and written.read_text() or child.poll() is not None, timeout=120,
                 message="the refit to write its participants' rows")
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        orphan = int(written.read_text())
        # The rows are committed, with their marker; the snapshot is not (the refit hangs in its transaction).
        assert EntityRating.objects.filter(snapshot_id=orphan, entity_kind="human").count() == 14
        assert PendingRatingRows.objects.filter(snapshot_id=orphan).exists()
        assert not RatingSnapshot.objects.filter(pk=orphan).exists()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    worker = WorkerProcess("default,grading,rating", worker_environment({"GRADING_SWEEP_SECONDS": "1"}),
                           args=("-B", "--schedule", str(tmp_path / "beat-schedule")))
    try:
        wait_for(lambda: _recovered(study, orphan), timeout=180,
                 message="the sweep to delete the killed refit's rows and refit the study")
    except BaseException:
        print(worker.output()[-4000:])
        raise
    finally:
        worker.stop()
        app.control.purge()
    assert not RatingSnapshot.objects.filter(pk=orphan).exists()

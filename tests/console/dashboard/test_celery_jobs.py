"""Dashboard jobs through a real Celery worker process: progress in the job row, results and files stored."""

from __future__ import annotations

import hashlib
import io
import time
import zipfile
from pathlib import Path

import pytest

from console.dashboard import services
from studies.models import BackgroundJob
from tests.conftest import wait_for
from tests.factories.scenarios import populated_study


@pytest.mark.django_db(transaction=True)
def test_the_stability_job_reports_progress_through_a_real_worker(celery_worker_process, settings):
    data = populated_study(n_participants=200, per_participant=3, surveys=False, extras=False, seed=11)
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 50_000}
    worker = celery_worker_process(queues="default")
    job = services.analysis_request(study=data.study, kind="stability", actor=None)  # enqueued on commit
    seen: list[tuple[str, int, int]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        row = BackgroundJob.objects.values_list("status", "progress_done", "progress_total").get(pk=job.pk)
        if not seen or seen[-1] != row:
            seen.append(row)
        if row[0] in ("done", "failed"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"stability job did not finish; states seen {seen}\n{worker.output()[-3000:]}")
    job.refresh_from_db()
    assert job.status == "done", job.error + worker.output()[-3000:]
    assert job.progress_done == job.progress_total == 50_001  # the rounds, then the model checks
    intermediate = [(done, total) for status, done, total in seen if status == "running" and 0 < done < total]
    assert intermediate, f"no intermediate progress observed: {seen}"
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)
    assert job.result["rounds"] == 50_000 and job.result["snapshot_version"] == data.snapshot.version
    assert {row["agent_id"] for row in job.result["leaderboard"]} == {str(a.pk) for a in data.agents}


@pytest.mark.django_db(transaction=True)
def test_an_export_job_runs_on_a_real_worker_and_stores_its_zip(celery_worker_process, settings):
    data = populated_study(n_participants=6, per_participant=2, seed=5)
    worker = celery_worker_process(queues="default")
    job = services.export_request(study=data.study, actor=None)
    wait_for(
        lambda: BackgroundJob.objects.get(pk=job.pk).status in ("done", "failed"), timeout=120,
        message=f"export job to finish\n{worker.output()[-2000:]}",
    )
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert job.progress_done == job.progress_total
    # The worker stores files with its own settings (VAR_DIR/media), not this test's temporary media folder.
    stored = Path(settings.VAR_DIR) / "media" / job.file.name
    try:
        archive = zipfile.ZipFile(io.BytesIO(stored.read_bytes()))
        assert "sessions.json" in archive.namelist()
        assert job.result["sha256"] == hashlib.sha256(stored.read_bytes()).hexdigest()
    finally:
        stored.unlink(missing_ok=True)

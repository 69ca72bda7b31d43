"""scripts/backup_restore_check.sh on the demo: backup, restore into a fresh database, exports equal byte for byte."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import connection

from studies.models import Episode, Study
from tests.conftest import ROOT, requires_postgres, worker_environment

pytestmark = [requires_postgres,
              pytest.mark.skipif(shutil.which("pg_dump") is None, reason="needs pg_dump and pg_restore")]


def _databases() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("select datname from pg_database")
        return {row[0] for row in cursor.fetchall()}


def _script(name: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / name), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)


def test_the_demo_backs_up_restores_into_a_fresh_database_and_exports_the_same_bytes(transactional_db, tmp_path):
    call_command("demo", "--if-empty", verbosity=0)
    media = Path(default_storage.location)
    assert Episode.objects.count() > 100 and any(media.rglob("*.*"))
    env = worker_environment({"VAR_DIR": str(tmp_path / "var"), "MEDIA_DIR": str(media), "PYTHON": sys.executable,
                              "DJANGO_SECRET_KEY": settings.SECRET_KEY, "KEEP_WORK": "1",
                              "TMPDIR": str(tmp_path)})

    result = _script("backup_restore_check.sh", env)

    assert result.returncode == 0, result.stdout + result.stderr
    for slug in Study.objects.values_list("slug", flat=True):
        assert f"export {slug}: identical" in result.stdout
    files = sum(1 for path in media.rglob("*") if path.is_file())
    assert f"private files: identical ({files} files)" in result.stdout
    assert "backup and restore check passed" in result.stdout
    fresh = {name for name in _databases() if name.startswith(connection.settings_dict["NAME"] + "_restore_check_")}
    assert fresh == set()  # the fresh database is dropped again

    # What was compared is the real export of the restored database, not an empty one.
    work = next(tmp_path.glob("backup-restore-check.*"))
    for slug in Study.objects.values_list("slug", flat=True):
        restored = work / "exports" / "restored" / f"{slug}.zip"
        assert restored.read_bytes() == (work / "exports" / "source" / f"{slug}.zip").read_bytes()
        with zipfile.ZipFile(restored) as archive:
            rows = archive.read("episodes.csv").decode().count("\n") - 1
        assert rows == Episode.objects.filter(study__slug=slug).count() > 0


def test_a_restore_refuses_a_database_that_is_not_empty(transactional_db, tmp_path):
    env = worker_environment({"MEDIA_DIR": str(tmp_path / "media")})
    backup = _script("backup.sh", env, str(tmp_path / "backup"))
    assert backup.returncode == 0, backup.stderr
    refused = _script("restore.sh", env, str(tmp_path / "backup"))  # back into the database it came from
    assert refused.returncode == 2 and "restore into an empty database" in refused.stderr


def test_a_restore_refuses_a_backup_whose_checksum_does_not_match(transactional_db, tmp_path):
    env = worker_environment({"MEDIA_DIR": str(tmp_path / "media")})
    assert _script("backup.sh", env, str(tmp_path / "backup")).returncode == 0
    with (tmp_path / "backup" / "database.dump").open("ab") as dump:
        dump.write(b"tampered")
    refused = _script("restore.sh", env, str(tmp_path / "backup"))
    assert refused.returncode != 0 and "FAILED" in refused.stdout + refused.stderr


def test_a_backup_is_readable_by_its_owner_only_whatever_the_umask(transactional_db, tmp_path):
    media = tmp_path / "media"
    (media / "logs").mkdir(parents=True)
    (media / "logs" / "upload.jsonl").write_text("{}\n")
    dest = tmp_path / "backup"
    dest.mkdir(mode=0o755)  # the operator made the folder beforehand, world-readable
    (dest / "database.dump").write_bytes(b"an older dump")
    (dest / "database.dump").chmod(0o644)  # left by an earlier run, world-readable
    env = worker_environment({"MEDIA_DIR": str(media)})
    result = subprocess.run(["bash", "-c", 'umask 022 && exec bash "$0" "$1"', str(ROOT / "scripts" / "backup.sh"),
                             str(dest)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert dest.stat().st_mode & 0o777 == 0o700
    modes = {path.name: path.stat().st_mode & 0o777 for path in dest.iterdir()}
    assert modes == {"database.dump": 0o600, "private-files.tar.gz": 0o600, "SHA256SUMS": 0o600}

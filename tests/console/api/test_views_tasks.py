"""Tasks, their permission-guarded reference and hidden files, and bundle import through the API."""

from __future__ import annotations

import io
import os

from studies.models import AuditEvent, TaskInstance
from tests.console.api.bundles import bundle_members, new_uuid, spec, zip_bytes
from tests.console.api.conftest import client_for


def _upload(content: bytes, name: str = "bundles.zip") -> io.BytesIO:
    upload = io.BytesIO(content)
    upload.name = name
    return upload


def test_staff_read_a_task_with_hidden_info_and_file_links(world, staff_client):
    response = staff_client.get(f"/api/tasks/{world.task.uuid}/")
    body = response.json()
    assert body["hidden_info"].startswith("GOLD")
    assert body["occupations"] == ["13-2011.00"]
    assert body["sector"] == "finance" and body["studies"] == ["alpha"]
    assert body["reference_files"].endswith(f"/api/tasks/{world.task.uuid}/reference-files/")


def test_staff_filter_tasks_by_sector_occupation_and_study(world, staff_client):
    assert staff_client.get("/api/tasks/?occupation=13-2011.00").json()["count"] == 1
    assert staff_client.get("/api/tasks/?sector=finance").json()["count"] == 2
    assert staff_client.get("/api/tasks/?study=beta").json()["count"] == 0


def test_hidden_files_are_listed_and_served_to_staff(world, staff_client):
    listing = staff_client.get(f"/api/tasks/{world.task.uuid}/hidden-files/").json()
    assert [f["name"] for f in listing["results"]] == ["gold.txt"]
    response = staff_client.get(listing["results"][0]["download_url"])
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert b"".join(response.streaming_content) == b"GOLD: the total is 10\n"


def test_reference_listing_never_includes_hidden_files(world, staff_client):
    listing = staff_client.get(f"/api/tasks/{world.task.uuid}/reference-files/").json()
    assert [f["name"] for f in listing["results"]] == ["ledger.csv"]
    hidden_through_reference = f"/api/tasks/{world.task.uuid}/reference-files/{world.hidden_file.pk}/download/"
    assert staff_client.get(hidden_through_reference).status_code == 404


def test_a_worker_reads_reference_files_only_of_their_own_tasks(world):
    own = client_for(world.worker)
    assert own.get(f"/api/tasks/{world.task.uuid}/reference-files/").status_code == 200
    assert own.get(f"/api/tasks/{world.other_task.uuid}/reference-files/").status_code == 404
    other = client_for(world.other_worker)
    assert other.get(f"/api/tasks/{world.task.uuid}/reference-files/").status_code == 404
    url = f"/api/tasks/{world.task.uuid}/reference-files/{world.reference_file.pk}/download/"
    assert other.get(url).status_code == 404


def test_an_expert_without_the_assignment_cannot_read_the_reference_files(world):
    client = client_for(world.other_expert)
    assert client.get(f"/api/tasks/{world.task.uuid}/reference-files/").status_code == 404
    assert client.get(f"/api/tasks/{world.other_task.uuid}/reference-files/").status_code == 200


def test_import_creates_tasks_attaches_them_to_a_study_and_is_audited(world, staff_client):
    task_id = new_uuid()
    members = bundle_members("one", data=spec(uuid=task_id), reference={"ledger.csv": b"a,b\n1,2\n"},
                             hidden={"gold.txt": b"gold\n"})
    response = staff_client.post("/api/tasks/import/", {"file": _upload(zip_bytes(members)), "study": "beta"},
                                 format="multipart")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["created"], body["updated"], body["unchanged"]) == (1, 0, 0)
    assert body["tasks"][0]["files_added"] == ["hidden/gold.txt", "reference/ledger.csv"]
    task = TaskInstance.objects.get(uuid=task_id)
    assert list(task.studies.values_list("slug", flat=True)) == ["beta"]
    assert AuditEvent.objects.filter(action="tasks.import", actor=world.staff).count() == 1


def test_import_dry_run_reports_without_writing(world, staff_client):
    task_id = new_uuid()
    response = staff_client.post(
        "/api/tasks/import/", {"file": _upload(zip_bytes(bundle_members(data=spec(uuid=task_id)))), "dry_run": True},
        format="multipart",
    )
    assert response.json()["dry_run"] is True and response.json()["created"] == 1
    assert not TaskInstance.objects.filter(uuid=task_id).exists()


def test_import_reports_every_problem_per_file_and_field_and_writes_nothing(world, staff_client):
    members = {
        **bundle_members("a", data=spec(uuid=new_uuid(), title="", occupations=["99-9999.99"])),
        **bundle_members("b", data=spec(uuid=new_uuid(), sector="nowhere"), reference={"run.exe": b"MZ"}),
        "../escape.txt": b"x",
    }
    before = TaskInstance.objects.count()
    response = staff_client.post("/api/tasks/import/", {"file": _upload(zip_bytes(members))}, format="multipart")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_task_bundle"
    assert set(error["fields"]) == {
        "a/task.json:title", "a/task.json:occupations[0]", "b/task.json:sector", "b/reference/run.exe",
        "../escape.txt",
    }
    assert "nothing was imported" in error["message"]
    assert TaskInstance.objects.count() == before


def test_import_accepts_a_bare_table_whose_rows_need_no_files(world, staff_client):
    task_id = new_uuid()
    table = f"task_id,sector,occupation,prompt\n{task_id},finance,13-2011.00,Reconcile the ledger.\n"
    response = staff_client.post("/api/tasks/import/", {"file": _upload(table.encode(), "tasks.csv")},
                                 format="multipart")
    assert response.status_code == 200, response.json()
    assert TaskInstance.objects.get(uuid=task_id).title == "Reconcile the ledger."


def test_import_of_a_bare_table_cannot_reach_files_outside_the_upload(world, staff_client):
    table = f"task_id,sector,occupation,prompt,reference_files\n{new_uuid()},finance,13-2011.00,P,secret.txt\n"
    response = staff_client.post("/api/tasks/import/", {"file": _upload(table.encode(), "tasks.csv")},
                                 format="multipart")
    assert response.status_code == 400
    assert "was not found" in response.json()["error"]["fields"]["tasks.csv:row 2.reference_files"][0]


def test_import_without_a_file_is_a_field_error(world, staff_client):
    response = staff_client.post("/api/tasks/import/", {}, format="multipart")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["file"]


def test_import_into_an_unknown_study_is_a_field_error(world, staff_client):
    upload = _upload(zip_bytes(bundle_members()))
    response = staff_client.post("/api/tasks/import/", {"file": upload, "study": "nope"}, format="multipart")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["study"]


def test_a_large_upload_streamed_to_a_temporary_file_imports(world, staff_client, settings):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1024
    big = os.urandom(64 * 1024).hex().encode()  # incompressible text, well over the in-memory limit
    members = bundle_members(data=spec(uuid=new_uuid()), reference={"big.csv": big})
    response = staff_client.post("/api/tasks/import/", {"file": _upload(zip_bytes(members))}, format="multipart")
    assert response.status_code == 200, response.json()
    assert response.json()["tasks"][0]["files_added"] == ["reference/big.csv"]


def test_a_nul_character_anywhere_in_an_imported_bundle_or_table_is_a_field_error_not_a_crash(world, staff_client):
    members = {
        **bundle_members("a", data=spec(uuid=new_uuid(), title="Ledger\x00summary", occupations=["13-2011.00"])),
        **bundle_members("b", data=spec(uuid=new_uuid(), required_software=["Ex\x00cel"])),
    }
    staff_client.raise_request_exception = False
    response = staff_client.post("/api/tasks/import/", {"file": _upload(zip_bytes(members))}, format="multipart")
    assert response.status_code == 400, response.content[:300]
    fields = response.json()["error"]["fields"]
    assert "NUL" in fields["a/task.json:title"][0]
    assert "NUL" in fields["b/task.json:required_software"][0]
    table = f"task_id,sector,occupation,prompt\n{new_uuid()},finance,13-2011.00,Reconcile\x00 the ledger.\n"
    response = staff_client.post("/api/tasks/import/", {"file": _upload(table.encode(), "tasks.csv")},
                                 format="multipart")
    assert response.status_code == 400, response.content[:300]
    assert "NUL" in response.json()["error"]["fields"]["tasks.csv:row 2.prompt"][0]
    assert not TaskInstance.objects.filter(title__startswith="Ledger").exists()

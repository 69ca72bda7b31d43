"""Every route to an export or payout file (dashboard, API, admin) hides identifying jobs from staff without
the identity permission: they are neither listed nor opened nor downloaded."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from studies.models import BackgroundJob
from tests.factories import StudyFactory

# Every named route that shows, lists or serves a background job's file. A new route whose name speaks of
# jobs or exports fails test_every_job_route_is_covered until it is added here and checked below.
DETAIL_ROUTES = {
    "dashboard:job_status": "dashboard",
    "dashboard:job_download": "dashboard",
    "api-study-exports-detail": "api",
    "api-study-exports-download": "api",
    "admin:studyapp_backgroundjob_change": "admin",
    "admin:studyapp_backgroundjob_history": "admin",
}
# Jobs are written only through services: the admin refuses these to everyone.
REFUSED_ROUTES = {"admin:studyapp_backgroundjob_add", "admin:studyapp_backgroundjob_delete"}
LIST_ROUTES = {
    "dashboard:exports": "dashboard",
    "api-study-exports-list": "api",
    "admin:studyapp_backgroundjob_changelist": "admin",
}


def _route_names() -> set[str]:
    names: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, f"{prefix}{pattern.namespace}:" if pattern.namespace else prefix)
            elif isinstance(pattern, URLPattern) and pattern.name:
                names.add(prefix + pattern.name)

    walk(get_resolver().url_patterns, "")
    return names


def test_every_job_route_is_covered():
    job_routes = {name for name in _route_names() if "job" in name or "export" in name}
    assert job_routes == set(DETAIL_ROUTES) | set(LIST_ROUTES) | REFUSED_ROUTES


def _job(study, *, include_pii: bool, kind: str = "export") -> BackgroundJob:
    job = BackgroundJob.objects.create(
        kind=kind, study=study, status=BackgroundJob.Status.DONE, params={"include_pii": include_pii},
        result={"include_pii": include_pii, "file_name": f"{kind}-{include_pii}.zip"},
    )
    job.file.save(f"{kind}-{job.pk}.zip", ContentFile(b"PK\x05\x06" + b"\0" * 18), save=True)
    return job


def _url(name: str, job: BackgroundJob) -> str:
    if name.startswith("admin:"):
        return reverse(name, args=[job.pk])
    if name.startswith("dashboard:"):
        return reverse(name, kwargs={"slug": job.study.slug, "job_id": job.pk})
    return reverse(name, kwargs={"slug": job.study.slug, "pk": job.pk})


def _list_url(name: str, study) -> str:
    if name.startswith("admin:"):
        return reverse(name)
    return reverse(name, kwargs={"slug": study.slug})


def _client(user, area: str):
    if area == "api":
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
        return client
    client = APIClient()
    client.force_login(user)
    return client


def _opens(response) -> bool:
    """An admin object the user may not see redirects to the admin index with a message; others are 404."""
    if response.status_code in (302, 404):
        return False
    assert response.status_code in (200, 409), response.status_code
    return True


@pytest.fixture
def jobs(db):
    study = StudyFactory(slug="files-study")
    return {
        "export_pii": _job(study, include_pii=True),
        "payouts_pii": _job(study, include_pii=True, kind="payouts"),
        "export_plain": _job(study, include_pii=False),
        "payouts_plain": _job(study, include_pii=False, kind="payouts"),
    }


@pytest.mark.django_db
@pytest.mark.parametrize("route", sorted(DETAIL_ROUTES))
def test_an_identifying_job_opens_only_with_the_identity_permission(route, jobs, staff_user, pii_user):
    area = DETAIL_ROUTES[route]
    kinds = ("export",) if area == "api" else ("export", "payouts")
    for kind in kinds:
        pii_job, plain_job = jobs[f"{kind}_pii"], jobs[f"{kind}_plain"]
        without = _client(staff_user, area)
        assert not _opens(without.get(_url(route, pii_job))), (route, kind)
        assert _opens(without.get(_url(route, plain_job))), (route, kind)
        assert _opens(_client(pii_user, area).get(_url(route, pii_job))), (route, kind)


@pytest.mark.django_db
def test_jobs_without_identities_stay_visible_to_staff(jobs, staff_user):
    analysis = BackgroundJob.objects.create(kind="stability", study=jobs["export_pii"].study, params={"rounds": 10})
    client = _client(staff_user, "dashboard")
    assert client.get(_url("dashboard:job_status", analysis)).json()["kind"] == "stability"
    assert _opens(client.get(_url("admin:studyapp_backgroundjob_change", analysis)))


@pytest.mark.django_db
def test_the_admin_refuses_to_add_or_delete_jobs(jobs, pii_user):
    client = _client(pii_user, "admin")
    assert client.get(reverse("admin:studyapp_backgroundjob_add")).status_code == 403
    assert client.get(_url("admin:studyapp_backgroundjob_delete", jobs["export_plain"])).status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("route", sorted(LIST_ROUTES))
def test_listings_do_not_reveal_identifying_jobs_to_staff_without_the_permission(route, jobs, staff_user, pii_user):
    area = LIST_ROUTES[route]
    study = jobs["export_pii"].study
    url = _list_url(route, study)
    pii_names = {jobs["export_pii"].result["file_name"], jobs["payouts_pii"].result["file_name"]}

    def listed(user) -> int:
        """Return how many jobs the page lists; check that nothing of an identifying job shows otherwise."""
        response = _client(user, area).get(url)
        assert response.status_code == 200
        if area == "api":
            return len(response.json()["results"])
        body = response.content.decode()
        if user is staff_user:
            assert "restricted" not in body and 'dash-warn">included' not in body
            assert not any(name in body for name in pii_names)
        if area == "admin":
            return sum(reverse("admin:studyapp_backgroundjob_change", args=[job.pk]) in body for job in jobs.values())
        return body.split("<tbody>", 1)[1].split("</tbody>", 1)[0].count("<tr>")

    kinds = 2 if area == "api" else 4
    assert listed(staff_user) == kinds // 2
    assert listed(pii_user) == kinds

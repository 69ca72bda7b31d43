"""Every main page is served with a Content-Security-Policy and runs under it without a violation: the
pages' own scripts and styles come from static files (or carry the response's nonce)."""

from __future__ import annotations

import pytest

from pairing.services import episode_assign
from tests.e2e.steps import login
from tests.factories import UserFactory
from tests.factories.scenarios import make_participant, make_world, populated_study

# Collects violations from the first script that runs, before any page script.
LISTEN = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""


def _visit(page, path: str) -> list[str]:
    response = page.goto(path)
    assert response is not None and response.status == 200, (path, response and response.status)
    policy = response.headers.get("content-security-policy", "")
    assert "script-src" in policy and "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";")[0], path
    page.wait_for_load_state("networkidle")
    return [f"{path}: {v}" for v in page.evaluate("window.__csp")]


@pytest.mark.django_db(transaction=True)
def test_worker_pages_run_without_csp_violations(page):
    world = make_world(with_files=True)
    participant = make_participant(world)
    participant.user.set_password("pw-correct-horse")
    participant.user.save()
    episode_assign(participant=participant, position=1)
    page.add_init_script(LISTEN)
    violations = _visit(page, "/accounts/login/")
    login(page, participant.user.username, "pw-correct-horse")
    for path in ("/study/pilot/", "/study/pilot/tasks/1/", "/study/pilot/profile/"):
        violations += _visit(page, path)
    assert violations == []


@pytest.mark.django_db(transaction=True)
def test_staff_pages_dashboard_admin_and_api_docs_run_without_csp_violations(page):
    populated = populated_study(n_participants=6, per_participant=2)
    UserFactory(username="root", is_staff=True, is_superuser=True)
    page.add_init_script(LISTEN)
    login(page, "root", "pw-correct-horse")
    slug = populated.study.slug
    violations: list[str] = []
    for path in (f"/admin/dashboard/{slug}/", f"/admin/dashboard/{slug}/leaderboard/",
                 f"/admin/dashboard/{slug}/exports/", "/admin/dashboard/help/glossary/", "/admin/",
                 "/admin/studyapp/episode/",
                 f"/admin/studyapp/study/{populated.study.pk}/change/", "/expert/staff/experts/",
                 "/expert/staff/routing/", "/api/docs/"):
        violations += _visit(page, path)
    page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)  # the UI rendered the schema under the policy
    violations += [f"/api/docs/ (after render): {v}" for v in page.evaluate("window.__csp")]
    page.goto("/expert/staff/routing/")
    page.select_option("#id_study_filter", str(populated.study.pk))  # the filter submits without inline code
    page.wait_for_url(f"**study={populated.study.pk}**")
    assert violations == []


@pytest.mark.django_db(transaction=True)
def test_expert_pages_run_without_csp_violations(page):
    UserFactory(username="expert", roles=["expert"])
    page.add_init_script(LISTEN)
    login(page, "expert", "pw-correct-horse")
    assert _visit(page, "/expert/") == []

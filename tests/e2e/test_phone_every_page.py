"""Every staff, expert and worker page at 390 px (a phone): nothing makes the page scroll sideways.

The page list is derived from the URL resolver: every named route of the worker, expert and dashboard
namespaces (and the site's own account pages) is either visited by a browser test here or in
``test_phone_worker_pages`` (whose walk records the pages it lands on), or excluded below with a reason, so a
new page cannot be forgotten. A table or chart wider than the screen scrolls inside its own box; the page
itself never does. One browser and one seeded study serve every page, and the staff pages' charts are
measured there too, at 390 and 1280 px (see ``test_chart_text_bounds``). Screenshots: var/e2e-phone-all-*.png
and var/e2e-charts-*.png.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest
from celery import current_app
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

from console.dashboard import services
from console.dashboard.exceptions import JobRefused
from tests.e2e.steps import close_quietly, login
from tests.e2e.test_chart_text_bounds import CHART_PAGES, OUTSIDE, SCALE

PHONE = {"width": 390, "height": 844}
PASSWORD = "pw-correct-horse"
NAMESPACES = ("worker", "expert", "dashboard", "")
# The worker walk in test_phone_worker_pages lands on these (it asserts so); the rest are visited here.
WORKER_WALK = frozenset({
    "worker:join", "worker:consent", "worker:profile", "worker:survey", "worker:task", "worker:episode-submit",
    "worker:complete", "worker:study", "worker:withdraw",
})
VISITED_HERE = frozenset({
    "login", "password_reset", "password_reset_done", "password_reset_confirm", "password_reset_complete",
    "worker:home", "worker:declined",
    "dashboard:index", "dashboard:glossary", "dashboard:overview", "dashboard:leaderboard", "dashboard:gate",
    "dashboard:surveys", "dashboard:collaboration", "dashboard:costs", "dashboard:synergy", "dashboard:exports",
    "dashboard:comparisons", "dashboard:tom",
    "expert:home", "expert:invite_accept", "expert:task_detail", "expert:rubric_detail", "expert:rubric_edit",
    "expert:grade",
    "expert:staff_experts", "expert:staff_expert_edit", "expert:staff_rubrics", "expert:staff_rubric_review",
    "expert:staff_routing", "expert:staff_gold", "expert:staff_gold_plant", "expert:staff_adjudication",
    "expert:staff_episode", "expert:staff_metrics", "expert:staff_comparisons", "expert:staff_tom_gold",
    "expert:tom_gold_list",
})
# Pages whose own browser test opens them at 390 px with the same no-sideways-scroll check (they need a comparison
# set or a drawn gold sample, which that test builds through the staff pages or the service).
OWN_PHONE_TEST = "measured at 390 px by its own browser test ({})"
POST_ONLY = "a POST endpoint: it redirects to a page listed here, or answers JSON"
FILE = "serves a file through the checked view, not a page"
EXCLUDED = {
    "home": "redirects to the signed-in user's start page",
    "logout": POST_ONLY,
    "metrics": "Prometheus text for a scraper",
    "worker:join-personal": "renders worker:join's page (journey/join.html) for a signed invitation",
    "worker:resume": "redirects to the participant's current step, or the join problem page worker:join shows",
    "worker:occupation-search": "JSON for the profile page's occupation picker",
    "worker:survey-autosave": POST_ONLY, "worker:task-start": POST_ONLY, "worker:finish-early": POST_ONLY,
    "worker:heartbeat": POST_ONLY, "worker:episode-setup": POST_ONLY, "worker:episode-setup-failed": POST_ONLY,
    "worker:episode-outside-expertise": POST_ONLY, "worker:episode-log": POST_ONLY,
    "worker:episode-solo": POST_ONLY, "worker:episode-upload": POST_ONLY, "worker:episode-file-delete": POST_ONLY,
    "worker:episode-file": FILE, "worker:reference-file": FILE, "worker:reference-zip": FILE,
    "expert:rubric_start": POST_ONLY, "expert:rubric_lint": POST_ONLY, "expert:grade_autosave": POST_ONLY,
    "expert:task_file": FILE, "expert:grade_file": FILE,
    "expert:staff_invite": "the same view and page as expert:staff_experts",
    "expert:staff_assignment_cancel": POST_ONLY, "expert:staff_assign": POST_ONLY,
    "expert:staff_adjudicate": POST_ONLY, "expert:staff_reattempt": POST_ONLY, "expert:staff_score_source": POST_ONLY,
    "dashboard:gate_evaluate": POST_ONLY, "dashboard:synergy_plan": POST_ONLY, "dashboard:analysis_run": POST_ONLY,
    "dashboard:job_status": "JSON polled by the progress bars", "dashboard:job_download": FILE,
    "dashboard:staff_action": POST_ONLY, "dashboard:design_set": POST_ONLY, "dashboard:power_run": POST_ONLY,
    "dashboard:plan_run": POST_ONLY,
    "expert:compare": OWN_PHONE_TEST.format("test_comparison_journey"),
    "expert:tom_gold_code": OWN_PHONE_TEST.format("test_tom_gold_autosave"),
    "expert:compare_autosave": POST_ONLY, "expert:tom_gold_autosave": POST_ONLY,
    "expert:staff_comparison_assign": POST_ONLY, "expert:staff_comparison_cancel": POST_ONLY,
    "expert:compare_file": FILE,
}
WIDTH = """() => {
  const inner = 390;
  const wide = Array.from(document.querySelectorAll('body *')).filter((node) => {
    const box = node.getBoundingClientRect();
    if (box.width === 0 || box.right <= inner + 0.5) return false;
    for (let up = node.parentElement; up; up = up.parentElement) {  // inside a box that scrolls: fine
      const style = getComputedStyle(up);
      if (['auto', 'scroll', 'hidden'].includes(style.overflowX) && up !== document.body) return false;
    }
    return true;
  }).slice(0, 3).map((node) => {
    const right = Math.round(node.getBoundingClientRect().right);
    return `${node.tagName.toLowerCase()}.${node.className} ${right}`;
  });
  return [document.documentElement.scrollWidth, window.innerWidth, wide];
}"""


def _route_names(resolver: URLResolver | None = None, namespace: str = "") -> set[str]:
    names: set[str] = set()
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            # The JSON API and Django's own admin screens are not pages of ours.
            if str(entry.pattern) in ("api/", "admin/") or (entry.namespace or namespace) not in NAMESPACES:
                continue
            names |= _route_names(entry, entry.namespace or namespace)
        elif isinstance(entry, URLPattern) and entry.name:
            names.add(f"{namespace}:{entry.name}" if namespace else entry.name)
    return names


def test_every_named_worker_expert_and_staff_route_is_visited_on_a_phone_or_excluded_with_a_reason():
    routes = _route_names()
    assert {"dashboard:synergy", "dashboard:costs", "expert:home", "worker:task"} <= routes
    missing = routes - WORKER_WALK - VISITED_HERE - set(EXCLUDED)
    assert not missing, f"routes neither visited at 390 px nor excluded with a reason: {sorted(missing)}"
    assert not (set(EXCLUDED) - routes), f"exclusions of routes that are gone: {sorted(set(EXCLUDED) - routes)}"
    assert not (VISITED_HERE & set(EXCLUDED)) and not (WORKER_WALK & set(EXCLUDED))


class _Visits:
    """Open pages, record the route each lands on and how wide it is."""

    def __init__(self, page) -> None:
        self.page = page
        self.landed: set[str] = set()
        self.too_wide: list[str] = []
        self.charts_drawn = 0
        self.chart_problems: list[str] = []

    def check(self, label: str) -> None:
        self.page.wait_for_load_state("load")
        name = resolve(urlparse(self.page.url).path).view_name
        self.landed.add(name)
        Path("var").mkdir(exist_ok=True)
        self.page.screenshot(path=f"var/e2e-phone-all-{label}.png", full_page=True)
        scroll, inner, wide = self.page.evaluate(WIDTH)
        # A phone widens its layout viewport to fit a too-wide page, so innerWidth alone would hide the problem.
        if max(scroll, inner) > PHONE["width"]:
            self.too_wide.append(f"{label} ({name}): {scroll} px; widest: {wide}")
        self.charts(label, PHONE["width"])

    def charts(self, label: str, width: int) -> None:
        """No chart text outside its drawing area, and no chart shrunk below the size it was drawn for."""
        self.charts_drawn += self.page.locator("svg.dash-chart").count()
        self.chart_problems += [f"{label} at {width} px, text outside: {row}" for row in self.page.evaluate(OUTSIDE)]
        self.chart_problems += [f"{label} at {width} px, shrunk: {row}" for row in self.page.evaluate(SCALE)
                                if row["scale"] < 0.99]

    def open(self, url: str, label: str, *, refused: bool = False) -> None:
        """Open a page that answers 200 (or, ``refused``, its own 4xx page)."""
        response = self.page.goto(url)
        assert response is not None and (400 <= response.status < 500 if refused else response.status == 200), (
            f"{url} answered {response and response.status}")
        self.check(label)


def _world(settings):
    from experts.services.routing import episode_assign_expert
    from tests.factories import ParticipantFactory, StudyFactory, UserFactory
    from tests.factories.experts import make_expert
    from tests.factories.scenarios import populated_study

    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 50}
    data = populated_study(n_participants=12, name="Agents at work: a long study name for a narrow screen")
    for kind in ("stability", "surveys", "collaboration", "graders", "synergy"):
        try:
            job = services.analysis_request(study=data.study, kind=kind, actor=None)
        except JobRefused:
            continue
        services.analysis_job_run(job_id=job.pk)
    expert = make_expert(username="eva", sectors=[data.episodes[0].task.sector])
    assignment = episode_assign_expert(episode=data.episodes[0], expert=expert, actor=None)
    UserFactory(username="sam", roles=["staff"])
    worker = UserFactory(username="wendy", roles=["worker"])
    ParticipantFactory(study=data.study, user=worker, status="declined")
    ParticipantFactory(study=StudyFactory(name="A second study with a long name"), user=worker)
    return data, expert, assignment


def _staff_pages(visits: _Visits, data, assignment) -> None:
    from experts.models import ExpertProfile
    from grading.models import Rubric

    slug = data.study.slug
    visits.open(reverse("dashboard:index"), "dashboard-index")
    visits.open(reverse("dashboard:glossary"), "dashboard-glossary")
    for name in ("overview", "leaderboard", "gate", "surveys", "collaboration", "costs", "synergy", "tom",
                 "comparisons", "exports"):
        visits.open(reverse(f"dashboard:{name}", args=[slug]), f"dashboard-{name}")
    profile = ExpertProfile.objects.get(user__username="eva")
    rubric = Rubric.objects.filter(task=assignment.episode.task).order_by("-pk").first()
    for label, url in (
        ("experts", reverse("expert:staff_experts")),
        ("expert-edit", reverse("expert:staff_expert_edit", args=[profile.pk])),
        ("rubrics", reverse("expert:staff_rubrics")),
        ("rubric-review", reverse("expert:staff_rubric_review", args=[rubric.pk])),
        ("routing", reverse("expert:staff_routing")),
        ("gold", reverse("expert:staff_gold")),
        ("gold-plant", reverse("expert:staff_gold_plant", args=[data.episodes[1].pk])),
        ("adjudication", reverse("expert:staff_adjudication")),
        ("episode", reverse("expert:staff_episode", args=[assignment.episode_id])),
        ("metrics", reverse("expert:staff_metrics")),
        ("comparisons", f"{reverse('expert:staff_comparisons')}?study={data.study.pk}"
                        f"&task={assignment.episode.task_id}"),
        ("tom-gold", reverse("expert:staff_tom_gold")),
    ):
        visits.open(url, f"staff-{label}")


def _desktop_charts(visits: _Visits, slug: str) -> None:
    """The same charts at 1280 px (screenshots var/e2e-charts-*.png), then back to the phone."""
    visits.page.set_viewport_size({"width": 1280, "height": 900})
    for name in CHART_PAGES:
        visits.page.goto(reverse(f"dashboard:{name}", args=[slug]))
        visits.page.screenshot(path=f"var/e2e-charts-{name}.png", full_page=True)
        visits.charts(name, 1280)
    visits.page.set_viewport_size(PHONE)


def _expert_pages(visits: _Visits, assignment) -> None:
    page = visits.page
    visits.open(reverse("expert:home"), "expert-home")
    # The queue's button sits inside its card, in view without scrolling anything sideways.
    start = page.get_by_role("link", name="Start grading").bounding_box()
    card = page.locator("section[aria-labelledby=queue-h]").bounding_box()
    assert start and card and card["x"] <= start["x"] and start["x"] + start["width"] <= card["x"] + card["width"]
    assert start["x"] + start["width"] <= PHONE["width"]
    visits.open(reverse("expert:invite_accept", args=["not-a-valid-token"]), "expert-invite", refused=True)
    visits.open(reverse("expert:task_detail", args=[assignment.episode.task_id]), "expert-task")
    page.get_by_role("button", name="Start blank").click()
    page.wait_for_url("**/rubrics/*/edit/")
    visits.check("expert-rubric-edit")
    visits.open(page.url.replace("/edit/", "/"), "expert-rubric")
    visits.open(reverse("expert:grade", args=[assignment.pk]), "expert-grade")
    visits.open(reverse("expert:tom_gold_list"), "expert-tom-gold")


def _account_pages(visits: _Visits) -> None:
    visits.open(reverse("login"), "login")
    visits.open(reverse("password_reset"), "password-reset")
    # Opened, not submitted to: the form is rate-limited per address, and the page reads the same either way.
    visits.open(reverse("password_reset_done"), "password-reset-sent")
    visits.open(reverse("password_reset_confirm", args=["MQ", "not-a-token"]), "password-reset-confirm")
    visits.open(reverse("password_reset_complete"), "password-reset-complete")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_every_staff_expert_and_worker_page_fits_a_phone_screen(browser, live_server, monkeypatch, settings):
    monkeypatch.setattr(current_app, "send_task", lambda name, args=None, **kw: None)
    data, _, assignment = _world(settings)
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    context.set_default_timeout(15_000)
    page = context.new_page()
    visits = _Visits(page)
    try:
        _account_pages(visits)
        login(page, "sam", PASSWORD)
        _staff_pages(visits, data, assignment)
        _desktop_charts(visits, data.study.slug)
        context.clear_cookies()
        login(page, "eva", PASSWORD)
        _expert_pages(visits, assignment)
        # Blinding holds on the phone layout too: no agent name on the grading page.
        assert assignment.episode.agent.name not in page.content()
        context.clear_cookies()
        login(page, "wendy", PASSWORD)
        visits.open(reverse("worker:home"), "worker-home")
        visits.open(reverse("worker:declined", args=[data.study.slug]), "worker-declined")
    finally:
        close_quietly(context)
    assert visits.landed >= VISITED_HERE, f"pages not reached: {sorted(VISITED_HERE - visits.landed)}"
    assert visits.too_wide == [], "pages wider than a 390 px screen:\n" + "\n".join(visits.too_wide)
    assert visits.chart_problems == [], "\n".join(visits.chart_problems)
    # Funnel, heatmap, residuals, pre/post, two forests, fluency r, win rates, synergy: at both widths.
    assert visits.charts_drawn >= 2 * 7

"""Staff dashboard URLs (namespace ``dashboard``); every view is an admin view, so only active staff get in."""

from django.contrib import admin
from django.urls import path

from console.dashboard import views

app_name = "dashboard"


def _staff(view):
    return admin.site.admin_view(view)


urlpatterns = [
    path("", _staff(views.index), name="index"),
    # Two segments, so no study slug can shadow it.
    path("help/glossary/", _staff(views.glossary), name="glossary"),
    path("<slug:slug>/", _staff(views.overview), name="overview"),
    path("<slug:slug>/leaderboard/", _staff(views.leaderboard), name="leaderboard"),
    path("<slug:slug>/gate/", _staff(views.gate), name="gate"),
    path("<slug:slug>/gate/evaluate/", _staff(views.gate_evaluate), name="gate_evaluate"),
    path("<slug:slug>/surveys/", _staff(views.surveys), name="surveys"),
    path("<slug:slug>/collaboration/", _staff(views.collaboration), name="collaboration"),
    path("<slug:slug>/costs/", _staff(views.costs), name="costs"),
    path("<slug:slug>/synergy/", _staff(views.synergy), name="synergy"),
    path("<slug:slug>/synergy/plan/", _staff(views.synergy_plan_run), name="synergy_plan"),
    path("<slug:slug>/why-some-gain-more/", _staff(views.tom), name="tom"),
    path("<slug:slug>/comparisons/", _staff(views.comparisons), name="comparisons"),
    path("<slug:slug>/exports/", _staff(views.exports), name="exports"),
    path("<slug:slug>/analysis/<str:kind>/run/", _staff(views.analysis_run), name="analysis_run"),
    path("<slug:slug>/jobs/<int:job_id>/status/", _staff(views.job_status), name="job_status"),
    path("<slug:slug>/jobs/<int:job_id>/download/", _staff(views.job_download), name="job_download"),
    path("<slug:slug>/actions/<str:action>/", _staff(views.staff_action), name="staff_action"),
    path("<slug:slug>/design/", _staff(views.design_set), name="design_set"),
    path("<slug:slug>/design/estimate/", _staff(views.power_run), name="power_run"),
    path("<slug:slug>/design/plan/", _staff(views.plan_run), name="plan_run"),
]

"""Expert workspace URLs (namespace ``expert``); ``expert:home`` is the expert's home page."""

from django.urls import path

from grading import expert_views, views_expert_grading, views_expert_rubrics, views_expert_staff

app_name = "expert"
urlpatterns = [
    path("", expert_views.home, name="home"),
    path("invite/<str:token>/", expert_views.invite_accept, name="invite_accept"),
    # Rubric authoring
    path("tasks/<int:task_id>/", views_expert_rubrics.task_detail, name="task_detail"),
    path("tasks/<int:task_id>/rubrics/new/", views_expert_rubrics.rubric_start, name="rubric_start"),
    path("tasks/<int:task_id>/files/<int:file_id>/", views_expert_rubrics.task_file, name="task_file"),
    path("rubrics/lint/", views_expert_rubrics.rubric_lint, name="rubric_lint"),
    path("rubrics/<int:rubric_id>/", views_expert_rubrics.rubric_detail, name="rubric_detail"),
    path("rubrics/<int:rubric_id>/edit/", views_expert_rubrics.rubric_edit, name="rubric_edit"),
    # Grading
    path("grade/<int:assignment_id>/", views_expert_grading.grade, name="grade"),
    path("grade/<int:assignment_id>/autosave/", views_expert_grading.grade_autosave, name="grade_autosave"),
    path("grade/<int:assignment_id>/files/<int:file_id>/", views_expert_grading.grade_file, name="grade_file"),
    # Staff
    path("staff/experts/", views_expert_staff.experts, name="staff_experts"),
    path("staff/invite/", views_expert_staff.experts, name="staff_invite"),
    path("staff/experts/<int:profile_id>/", views_expert_staff.expert_edit, name="staff_expert_edit"),
    path("staff/rubrics/", views_expert_staff.rubrics, name="staff_rubrics"),
    path("staff/rubrics/<int:rubric_id>/", views_expert_staff.rubric_review, name="staff_rubric_review"),
    path("staff/routing/", views_expert_staff.routing_page, name="staff_routing"),
    path("staff/assignments/<int:assignment_id>/cancel/", views_expert_staff.assignment_cancel,
         name="staff_assignment_cancel"),
    path("staff/gold/", views_expert_staff.gold, name="staff_gold"),
    path("staff/gold/<int:episode_id>/", views_expert_staff.gold_plant, name="staff_gold_plant"),
    path("staff/adjudication/", views_expert_staff.adjudication, name="staff_adjudication"),
    path("staff/episodes/<int:episode_id>/", views_expert_staff.episode_grades, name="staff_episode"),
    path("staff/episodes/<int:episode_id>/assign/", views_expert_staff.assign, name="staff_assign"),
    path("staff/episodes/<int:episode_id>/adjudicate/", views_expert_staff.adjudicate, name="staff_adjudicate"),
    path("staff/episodes/<int:episode_id>/reattempt/", views_expert_staff.reattempt, name="staff_reattempt"),
    path("staff/metrics/", views_expert_staff.metrics_page, name="staff_metrics"),
    path("staff/studies/<int:study_id>/score-source/", views_expert_staff.score_source, name="staff_score_source"),
]

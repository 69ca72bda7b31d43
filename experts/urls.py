"""Expert workspace URLs (namespace ``expert``); ``expert:home`` is the expert's home page."""

from django.urls import path

from experts.views import comparisons, grading, home, rubrics, staff, staff_comparisons, tom_gold

app_name = "expert"
urlpatterns = [
    path("", home.home, name="home"),
    path("invite/<str:token>/", home.invite_accept, name="invite_accept"),
    # Rubric authoring
    path("tasks/<int:task_id>/", rubrics.task_detail, name="task_detail"),
    path("tasks/<int:task_id>/rubrics/new/", rubrics.rubric_start, name="rubric_start"),
    path("tasks/<int:task_id>/files/<int:file_id>/", rubrics.task_file, name="task_file"),
    path("rubrics/lint/", rubrics.rubric_lint, name="rubric_lint"),
    path("rubrics/<int:rubric_id>/", rubrics.rubric_detail, name="rubric_detail"),
    path("rubrics/<int:rubric_id>/edit/", rubrics.rubric_edit, name="rubric_edit"),
    # Grading
    path("grade/<int:assignment_id>/", grading.grade, name="grade"),
    path("grade/<int:assignment_id>/autosave/", grading.grade_autosave, name="grade_autosave"),
    path("grade/<int:assignment_id>/files/<int:file_id>/", grading.grade_file, name="grade_file"),
    # Blind comparisons
    path("compare/<int:assignment_id>/", comparisons.compare, name="compare"),
    path("compare/<int:assignment_id>/autosave/", comparisons.compare_autosave, name="compare_autosave"),
    path("compare/<int:assignment_id>/<int:position>/files/<int:number>/", comparisons.compare_file,
         name="compare_file"),
    # Staff
    path("staff/comparisons/", staff_comparisons.comparisons, name="staff_comparisons"),
    path("staff/comparisons/<int:set_id>/assign/", staff_comparisons.comparison_set_assign,
         name="staff_comparison_assign"),
    path("staff/comparisons/assignments/<int:assignment_id>/cancel/", staff_comparisons.comparison_assignment_cancel,
         name="staff_comparison_cancel"),
    path("staff/experts/", staff.experts, name="staff_experts"),
    path("staff/invite/", staff.experts, name="staff_invite"),
    path("staff/experts/<int:profile_id>/", staff.expert_edit, name="staff_expert_edit"),
    path("staff/rubrics/", staff.rubrics, name="staff_rubrics"),
    path("staff/rubrics/<int:rubric_id>/", staff.rubric_review, name="staff_rubric_review"),
    path("staff/routing/", staff.routing_page, name="staff_routing"),
    path("staff/assignments/<int:assignment_id>/cancel/", staff.assignment_cancel,
         name="staff_assignment_cancel"),
    path("tom/", tom_gold.tom_gold_list, name="tom_gold_list"),
    path("tom/<int:code_id>/", tom_gold.tom_gold_code, name="tom_gold_code"),
    path("tom/<int:code_id>/autosave/", tom_gold.tom_gold_autosave, name="tom_gold_autosave"),
    path("staff/tom-gold/", tom_gold.staff_tom_gold, name="staff_tom_gold"),
    path("staff/gold/", staff.gold, name="staff_gold"),
    path("staff/gold/<int:episode_id>/", staff.gold_plant, name="staff_gold_plant"),
    path("staff/adjudication/", staff.adjudication, name="staff_adjudication"),
    path("staff/episodes/<int:episode_id>/", staff.episode_grades, name="staff_episode"),
    path("staff/episodes/<int:episode_id>/assign/", staff.assign, name="staff_assign"),
    path("staff/episodes/<int:episode_id>/adjudicate/", staff.adjudicate, name="staff_adjudicate"),
    path("staff/episodes/<int:episode_id>/reattempt/", staff.reattempt, name="staff_reattempt"),
    path("staff/metrics/", staff.metrics_page, name="staff_metrics"),
    path("staff/studies/<int:study_id>/score-source/", staff.score_source, name="staff_score_source"),
]

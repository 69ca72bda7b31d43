"""Worker journey URLs (namespace ``worker``).

Study-scoped pages use the study slug and the signed-in account to find the participant; episode-scoped
endpoints use the episode id but only ever look it up among the account's own episodes (others → 404).
"""

from django.urls import path

from journey.views import journey, task_page, uploads
from journey.views import survey as survey_views

app_name = "worker"
urlpatterns = [
    path("join/<str:invite_code>/", journey.join, name="join"),
    path("join/<str:invite_code>/i/<str:token>/", journey.join_personal, name="join-personal"),
    path("p/<str:token>/", journey.resume, name="resume"),
    path("my-study/", journey.home, name="home"),
    path("occupations/search/", journey.occupation_lookup, name="occupation-search"),
    path("study/<slug:study_slug>/", journey.study, name="study"),
    path("study/<slug:study_slug>/consent/", journey.consent, name="consent"),
    path("study/<slug:study_slug>/declined/", journey.declined, name="declined"),
    path("study/<slug:study_slug>/profile/", journey.profile, name="profile"),
    path("study/<slug:study_slug>/survey/<str:phase>/", survey_views.take, name="survey"),
    path("study/<slug:study_slug>/survey/<str:phase>/autosave/", survey_views.autosave, name="survey-autosave"),
    path("study/<slug:study_slug>/tasks/<int:position>/", task_page.task, name="task"),
    path("study/<slug:study_slug>/tasks/<int:position>/start/", task_page.task_start, name="task-start"),
    path("study/<slug:study_slug>/finish-early/", task_page.finish_early, name="finish-early"),
    path("study/<slug:study_slug>/complete/", journey.complete, name="complete"),
    path("study/<slug:study_slug>/withdraw/", journey.withdraw, name="withdraw"),
    path("study/<slug:study_slug>/ping/", journey.heartbeat, name="heartbeat"),
    path("episodes/<int:episode_id>/setup/", task_page.setup, name="episode-setup"),
    path("episodes/<int:episode_id>/setup-failed/", task_page.setup_failed, name="episode-setup-failed"),
    path("episodes/<int:episode_id>/outside-expertise/", task_page.skip_outside_expertise,
         name="episode-outside-expertise"),
    path("episodes/<int:episode_id>/log/", task_page.log, name="episode-log"),
    path("episodes/<int:episode_id>/solo/", task_page.solo, name="episode-solo"),
    path("episodes/<int:episode_id>/submit/", task_page.submit, name="episode-submit"),
    path("episodes/<int:episode_id>/files/", uploads.upload, name="episode-upload"),
    path("episodes/<int:episode_id>/files/<int:file_id>/", uploads.download, name="episode-file"),
    path("episodes/<int:episode_id>/files/<int:file_id>/remove/", uploads.remove, name="episode-file-delete"),
    path("episodes/<int:episode_id>/reference/<int:file_id>/", uploads.reference_download, name="reference-file"),
    path("episodes/<int:episode_id>/reference.zip", uploads.reference_zip, name="reference-zip"),
]

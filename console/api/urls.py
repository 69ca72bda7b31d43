"""REST API URLs (/api/). See the Swagger UI at /api/docs/ ("api-docs") and the schema at /api/schema/."""

from __future__ import annotations

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from console.api.errors import not_found
from console.api.views.auth import DocsView, SchemaView, StaffTokenView
from console.api.views.catalogue import AgentViewSet, OccupationViewSet, SectorViewSet
from console.api.views.episodes import EpisodeViewSet, ParticipantViewSet
from console.api.views.grading import ExpertGradeViewSet, JudgeRunViewSet
from console.api.views.studies import StudyExportViewSet, StudyViewSet
from console.api.views.tasks import TaskHiddenFileViewSet, TaskReferenceFileViewSet, TaskViewSet

router = SimpleRouter(use_regex_path=False)
router.register("studies", StudyViewSet, basename="api-study")
router.register("sectors", SectorViewSet, basename="api-sector")
router.register("occupations", OccupationViewSet, basename="api-occupation")
router.register("agents", AgentViewSet, basename="api-agent")
router.register("tasks", TaskViewSet, basename="api-task")
router.register("participants", ParticipantViewSet, basename="api-participant")
router.register("episodes", EpisodeViewSet, basename="api-episode")
router.register("judge-runs", JudgeRunViewSet, basename="api-judge-run")
router.register("expert-grades", ExpertGradeViewSet, basename="api-expert-grade")

urlpatterns = [
    path("auth/token/", StaffTokenView.as_view(), name="api-token"),
    path("schema/", SchemaView.as_view(), name="api-schema"),
    path("docs/", DocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("studies/<slug:slug>/exports/", StudyExportViewSet.as_view({"get": "list", "post": "create"}),
         name="api-study-exports-list"),
    path("studies/<slug:slug>/exports/<int:pk>/", StudyExportViewSet.as_view({"get": "retrieve"}),
         name="api-study-exports-detail"),
    path("studies/<slug:slug>/exports/<int:pk>/download/", StudyExportViewSet.as_view({"get": "download"}),
         name="api-study-exports-download"),
    path("tasks/<uuid:uuid>/reference-files/", TaskReferenceFileViewSet.as_view({"get": "list"}),
         name="api-task-reference-files-list"),
    path("tasks/<uuid:uuid>/reference-files/<int:pk>/download/",
         TaskReferenceFileViewSet.as_view({"get": "download"}), name="api-task-reference-files-download"),
    path("tasks/<uuid:uuid>/hidden-files/", TaskHiddenFileViewSet.as_view({"get": "list"}),
         name="api-task-hidden-files-list"),
    path("tasks/<uuid:uuid>/hidden-files/<int:pk>/download/",
         TaskHiddenFileViewSet.as_view({"get": "download"}), name="api-task-hidden-files-download"),
    *router.urls,
    # Anything else under /api/ answers in the API's error shape rather than the site's HTML 404 page
    # ("[\s\S]", not ".", so that a path holding an encoded newline is unknown too).
    re_path(r"^[\s\S]*$", not_found),
]

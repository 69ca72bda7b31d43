from django.apps import AppConfig


class StudiesConfig(AppConfig):
    """The study domain. Its label stays ``studyapp`` (the package's name before the project package was split
    from it), so every table, migration record, content type, permission and admin URL keeps its name."""

    name = "studies"
    label = "studyapp"
    verbose_name = "Study"

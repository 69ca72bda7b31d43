from django.apps import AppConfig


class JourneyConfig(AppConfig):
    name = "journey"
    label = "journey"
    verbose_name = "Worker journey"

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    label = "console"
    verbose_name = "Staff console"

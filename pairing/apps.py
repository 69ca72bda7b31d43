from django.apps import AppConfig


class PairingConfig(AppConfig):
    name = "pairing"
    label = "pairing"
    verbose_name = "Pairing"

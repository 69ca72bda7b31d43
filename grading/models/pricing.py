"""The price table that turns recorded model usage into money: admin-editable, dated, never guessed."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models


class ModelPrice(models.Model):
    """What one model's tokens cost from a date on (US dollars per million tokens).

    A recorded model name takes the price of the longest ``model`` it starts with (``claude-sonnet-4``
    prices ``claude-sonnet-4-20250514``), from the newest row in force on the episode's date. A model with no
    such row has an unknown cost: the platform never guesses a price.
    """

    model = models.CharField(max_length=120, help_text="Model name, or the start of the names it prices.")
    effective_from = models.DateField(help_text="First day this price applies (episodes are priced on their "
                                                "submission date).")
    input_per_million = models.DecimalField(max_digits=10, decimal_places=4,
                                            help_text="USD per million uncached input tokens.")
    cache_read_per_million = models.DecimalField(max_digits=10, decimal_places=4,
                                                 help_text="USD per million input tokens read from the cache.")
    cache_write_per_million = models.DecimalField(max_digits=10, decimal_places=4,
                                                  help_text="USD per million input tokens written to the cache.")
    output_per_million = models.DecimalField(max_digits=10, decimal_places=4,
                                             help_text="USD per million output tokens (reasoning included).")
    source = models.CharField(max_length=255, blank=True, help_text="Where the price was read (page, date).")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["model", "effective_from"], name="uniq_model_price_per_day"),
            models.CheckConstraint(
                condition=models.Q(input_per_million__gte=0, cache_read_per_million__gte=0,
                                   cache_write_per_million__gte=0, output_per_million__gte=0),
                name="model_price_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.model} from {self.effective_from}"

    def clean(self) -> None:
        self.model = (self.model or "").strip()
        if not self.model:
            raise ValidationError({"model": "Name the model (or the start of the model names) this price is for."})

"""O*NET taxonomy: sectors and occupations used to match workers to tasks."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models


class Sector(models.Model):
    """An O*NET work sector (career cluster) grouping occupations."""

    code = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Occupation(models.Model):
    """An O*NET-SOC occupation, e.g. 13-2011.00 Accountants and Auditors."""

    soc_code = models.CharField(max_length=10, unique=True, help_text="O*NET-SOC code, e.g. 13-2011.00")
    title = models.CharField(max_length=255, db_index=True)
    description = models.TextField(blank=True)
    sector = models.ForeignKey(
        Sector, null=True, blank=True, on_delete=models.SET_NULL, related_name="occupations"
    )
    hourly_wage_usd = models.DecimalField(
        max_digits=8, decimal_places=2, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="The occupation's hourly wage in US dollars (e.g. the BLS median), used to price worker time in "
                  "the workflow comparison; empty: that time cannot be priced.")
    wage_source = models.CharField(max_length=300, blank=True, help_text="Where the wage was read, and its year.")
    # Not a column: how many tasks the study can still give, set on picker results by the occupation search.
    reach: int

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return f"{self.title} ({self.soc_code})"


class SectorFallback(models.Model):
    """Staff-editable mapping: when a sector has no task left, also offer tasks from another sector."""

    study = models.ForeignKey("studyapp.Study", on_delete=models.CASCADE, related_name="sector_fallbacks")
    from_sector = models.ForeignKey(Sector, on_delete=models.CASCADE, related_name="+")
    to_sector = models.ForeignKey(Sector, on_delete=models.CASCADE, related_name="+")
    priority = models.PositiveSmallIntegerField(default=1, help_text="Lower numbers are tried first.")

    class Meta:
        ordering = ["study", "from_sector", "priority"]
        constraints = [
            models.UniqueConstraint(fields=["study", "from_sector", "to_sector"], name="uniq_sector_fallback"),
            models.CheckConstraint(
                condition=~models.Q(from_sector=models.F("to_sector")), name="fallback_differs_from_source"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.from_sector} → {self.to_sector}"

"""AI agents workers are paired with."""

from __future__ import annotations

from django.db import models

from studies.log_sources import LogFormat
from studies.model_families import normalise_family


class Agent(models.Model):
    """An agent product with its setup guide and how its collaboration log is collected."""

    class Interface(models.TextChoices):
        TERMINAL = "terminal", "Terminal"
        DESKTOP = "desktop", "Desktop app"
        BROWSER = "browser", "Browser"

    class LogMode(models.TextChoices):
        UPLOAD = "upload", "Upload log files or screenshots"
        SHARE_URL = "share_url", "Shared-session link"
        EITHER = "either", "Files and/or a shared-session link"

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=64, unique=True)
    product = models.CharField(max_length=100, blank=True)
    model_version = models.CharField(max_length=100, blank=True)
    interface = models.CharField(max_length=16, choices=Interface.choices, default=Interface.TERMINAL)
    setup_guide = models.TextField(blank=True, help_text="Markdown; rendered with HTML sanitised.")
    tutorial_url = models.URLField(
        blank=True, help_text="Getting-started tutorial (video or guide), shown to workers who never used the agent."
    )
    log_instructions = models.TextField(blank=True, help_text="Markdown: how to export the collaboration log.")
    log_mode = models.CharField(max_length=16, choices=LogMode.choices, default=LogMode.UPLOAD)
    log_format = models.CharField(
        max_length=16, choices=LogFormat.choices, blank=True,
        help_text="Which session file workers upload (shown on the task page); blank: inferred from the name of a "
                  "terminal agent (Claude Code, Codex, Gemini CLI).",
    )
    share_url_hosts = models.JSONField(
        default=list, blank=True, help_text="Hosts a shared-session link must point to, e.g. [\"manus.im\"]."
    )
    family = models.CharField(
        max_length=32, blank=True,
        help_text="Model family the agent's work comes from (anthropic, openai, google, …); a judge of the same "
                  "family may favour it. Stored lower-case without surrounding spaces, as judges' families are. Left "
                  "blank in the admin, it is filled in from the model version, product and name.",
    )
    is_active = models.BooleanField(default=True, db_index=True)
    studies = models.ManyToManyField("studyapp.Study", related_name="agents", blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.model_version})" if self.model_version else self.name

    def save(self, *args: object, **kwargs: object) -> None:
        # Every write stores the family as judges' families are stored (stripped, lower-case), so the judge-aware
        # rating matches them; a form, the demo, a fixture or the shell all pass here.
        self.family = normalise_family(self.family)
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def clean(self) -> None:
        super().clean()
        self.family = normalise_family(self.family)

"""Forms behind the dashboard's staff actions and export requests.

Each action form resolves its target within the study named in the URL, so an id from another study is
an invalid choice rather than a way in.
"""

from __future__ import annotations

from typing import Any

from django import forms

from console.payouts import PAYOUT_FORMATS
from studies.models import Agent, Episode, Participant, Study
from studies.services.staff_actions import MAX_EXTENSION


class _StudyForm(forms.Form):
    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        self.study = study
        super().__init__(*args, **kwargs)


class _ParticipantForm(_StudyForm):
    participant = forms.ModelChoiceField(queryset=Participant.objects.none(), widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["participant"].queryset = Participant.objects.filter(study=self.study)


class _EpisodeForm(_StudyForm):
    episode = forms.ModelChoiceField(queryset=Episode.objects.none(), widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["episode"].queryset = Episode.objects.filter(study=self.study).select_related("study")


class RemindForm(_ParticipantForm):
    message = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Optional note added to the reminder email.",
    )


class WithdrawForm(_ParticipantForm):
    reason = forms.CharField(max_length=2000, help_text="Why, e.g. “asked by email on 3 May”.")


class ExtendDeadlineForm(_EpisodeForm):
    hours = forms.FloatField(
        min_value=0.25, max_value=MAX_EXTENSION.total_seconds() / 3600, initial=24, label="Extend by (hours)"
    )


class SkipForm(_EpisodeForm):
    reason = forms.CharField(max_length=2000, help_text="Shown in the record, e.g. “agent will not install”.")


class ReassignForm(_EpisodeForm):
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), label="New agent")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = Agent.objects.filter(studies=self.study, is_active=True).order_by("name")


class RetryForm(_EpisodeForm):
    pass


ACTION_FORMS: dict[str, type[_StudyForm]] = {
    "remind": RemindForm,
    "withdraw": WithdrawForm,
    "extend": ExtendDeadlineForm,
    "skip": SkipForm,
    "reassign": ReassignForm,
    "retry": RetryForm,
}


class ExportForm(forms.Form):
    include_pii = forms.BooleanField(
        required=False,
        label="Include identifying information (emails, names, platform ids, typed free text, collaboration "
        "transcripts)",
    )


class PayoutForm(forms.Form):
    file_format = forms.ChoiceField(choices=list(PAYOUT_FORMATS.items()), label="Format")
    include_pii = forms.BooleanField(required=False, label="Use recruitment-platform worker ids")


class WorkflowForm(forms.Form):
    """The Time & cost page's target score and expert wage for the workflow comparison (a GET form)."""

    target = forms.FloatField(
        min_value=0, max_value=100, label="Target score",
        error_messages={"required": "Enter a target score from 0 to 100.",
                        "invalid": "Enter the target score as a number from 0 to 100, for example 70.",
                        "min_value": "Enter a target score from 0 to 100.",
                        "max_value": "Enter a target score from 0 to 100."})
    expert_wage = forms.DecimalField(
        required=False, min_value=0, max_value=10_000, decimal_places=2, label="Expert wage (US dollars per hour)",
        error_messages={"invalid": "Enter the expert wage in US dollars per hour, for example 85, or leave it empty.",
                        "min_value": "Enter an expert wage of 0 or more US dollars per hour.",
                        "max_value": "Enter an expert wage of at most 10,000 US dollars per hour.",
                        "max_decimal_places": "Enter the expert wage with at most two decimals."})

"""Forms of the expert workspace, and the parsers that turn a grade page's POST or JSON into service input."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm
from django.forms import formset_factory

from experts.models import ExpertGrade, ExpertProfile
from experts.services.grading import VerdictInput
from experts.services.rubric_authoring import MAX_DRAFT_ROWS, CriterionInput
from grading.models import Criterion, Rubric
from grading.schemas import RUBRIC_CATEGORIES
from studies.models import Sector, Study

LABEL_CHOICES = [("", "— choose a label —"), *Criterion.Label.choices]
CATEGORY_CHOICES = [(code, f"{name} ({points:g} pts)") for code, name, points in RUBRIC_CATEGORIES]


class InviteCreateForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Optional: the link is also e-mailed to this address.")
    sectors = forms.ModelMultipleChoiceField(queryset=Sector.objects.order_by("name"),
                                             widget=forms.CheckboxSelectMultiple,
                                             error_messages={"required": "Choose at least one sector."})
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=1000)


class InviteAcceptForm(UserCreationForm):
    """Username and password (checked by the project's password validators) for a new expert account."""

    email = forms.EmailField(required=False)

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


class ExpertProfileForm(forms.Form):
    sectors = forms.ModelMultipleChoiceField(queryset=Sector.objects.order_by("name"), required=False,
                                             widget=forms.CheckboxSelectMultiple)
    is_active = forms.BooleanField(required=False, label="Active (receives work and can open the workspace)")


class CriterionForm(forms.Form):
    """One editor row. Every field is optional here: a draft may be incomplete; submission checks it all."""

    description = forms.CharField(required=False, max_length=2000,
                                  widget=forms.Textarea(attrs={"rows": 2, "class": "crit-description"}))
    label = forms.ChoiceField(choices=LABEL_CHOICES, required=False,
                              widget=forms.Select(attrs={"class": "crit-label"}))
    category = forms.ChoiceField(choices=CATEGORY_CHOICES, initial=Criterion.Category.REQUIREMENTS,
                                 widget=forms.Select(attrs={"class": "crit-category"}))
    points = forms.FloatField(required=False, min_value=0, max_value=100,
                              widget=forms.NumberInput(attrs={"step": "0.01", "class": "crit-points",
                                                              "placeholder": "auto"}))
    expected_value = forms.CharField(required=False, max_length=1000,
                                     widget=forms.TextInput(attrs={"placeholder": "Expected value (optional)"}))
    evaluation_method = forms.CharField(required=False, max_length=1000,
                                        widget=forms.TextInput(attrs={"placeholder": "How to check it (optional)"}))
    matches_auto = forms.TypedMultipleChoiceField(coerce=int, required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, auto_choices: list[tuple[int, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["matches_auto"].choices = auto_choices or []

    def to_input(self) -> CriterionInput:
        data = self.cleaned_data
        return CriterionInput(description=data.get("description", ""), label=data.get("label", ""),
                              category=data.get("category") or Criterion.Category.REQUIREMENTS,
                              points=data.get("points"), expected_value=data.get("expected_value", ""),
                              evaluation_method=data.get("evaluation_method", ""),
                              matches_auto=list(data.get("matches_auto") or []))


CriterionFormSet = formset_factory(CriterionForm, extra=0, can_delete=True, max_num=MAX_DRAFT_ROWS,
                                   validate_max=True, absolute_max=MAX_DRAFT_ROWS)


def criterion_initial(row: CriterionInput) -> dict[str, Any]:
    return {"description": row.description, "label": row.label, "category": row.category, "points": row.points,
            "expected_value": row.expected_value, "evaluation_method": row.evaluation_method,
            "matches_auto": row.matches_auto}


def formset_inputs(formset: Any) -> list[CriterionInput]:
    """Rows the expert kept (deleted rows dropped; empty rows are dropped later by the service)."""
    return [form.to_input() for form in formset.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")]


class RubricMetaForm(forms.Form):
    lock_version = forms.IntegerField(widget=forms.HiddenInput, min_value=0)
    notes = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3}),
                            label="Notes for graders (optional)")


class RubricStartForm(forms.Form):
    based_on = forms.ModelChoiceField(queryset=Rubric.objects.none(), required=False)

    def __init__(self, *args: Any, rubrics: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if rubrics is not None:
            self.fields["based_on"].queryset = rubrics


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Send back")])
    note = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 3}),
                           help_text="Required when sending back; shown to the expert.")


class ScoreSourceForm(forms.Form):
    source = forms.ChoiceField(choices=Study.ScoreSource.choices)
    blend_expert_weight = forms.FloatField(min_value=0.0, max_value=1.0,
                                           help_text="Weight of the expert score when blending (0–1).")


class DoubleGradingForm(forms.Form):
    share = forms.FloatField(min_value=0.0, max_value=1.0, label="Double-grading share",
                             help_text="Share of episodes (0–1) that also get an independent second grade.")


class AdjudicationForm(forms.Form):
    adjudicator = forms.ModelChoiceField(queryset=ExpertProfile.objects.none(), required=False,
                                         empty_label="Me (staff)")

    def __init__(self, *args: Any, experts: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if experts is not None:
            self.fields["adjudicator"].queryset = experts
        self.fields["adjudicator"].label_from_instance = lambda p: p.user.get_username()


class ExpertChoiceForm(forms.Form):
    expert = forms.ModelChoiceField(queryset=ExpertProfile.objects.none(), required=False,
                                    empty_label="Least-loaded expert in the sector")

    def __init__(self, *args: Any, experts: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if experts is not None:
            self.fields["expert"].queryset = experts
        self.fields["expert"].label_from_instance = lambda p: p.user.get_username()


class ExpertAssignForm(forms.Form):
    """Staff choose an expert by name; the label shows their sectors so a domain match is easy to see."""

    expert = forms.ModelChoiceField(queryset=ExpertProfile.objects.none(), empty_label="Choose an expert",
                                    error_messages={"required": "Choose an expert."},
                                    widget=forms.Select(attrs={"id": "id_assign_expert"}))

    def __init__(self, *args: Any, experts: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if experts is not None:
            self.fields["expert"].queryset = experts
        self.fields["expert"].label_from_instance = lambda p: (
            f"{p.user.get_username()} ({', '.join(s.name for s in p.sectors.all()) or 'no sector'})"
        )


class ToMGoldDrawForm(forms.Form):
    """Staff draw a ToM study's gold sample: how many episodes, the seed, the experts and experts per episode."""

    size = forms.IntegerField(min_value=1, max_value=10000, initial=40)
    seed = forms.IntegerField(min_value=0, max_value=2**62, initial=20260101)
    experts = forms.ModelMultipleChoiceField(queryset=ExpertProfile.objects.none())
    raters_per_episode = forms.IntegerField(min_value=1, max_value=20, initial=2)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["experts"].queryset = ExpertProfile.objects.filter(is_active=True).select_related("user")
        self.fields["experts"].label_from_instance = lambda p: p.user.get_username()

    def draw_kwargs(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {"size": data["size"], "seed": data["seed"], "experts": list(data["experts"].order_by("pk")),
                "raters_per_episode": data["raters_per_episode"]}


class GoldPlantForm(forms.Form):
    """Known answers per criterion key, and who receives the gold copy."""

    experts = forms.ModelMultipleChoiceField(queryset=ExpertProfile.objects.none(),
                                             widget=forms.CheckboxSelectMultiple,
                                             error_messages={"required": "Choose at least one expert."})

    def __init__(self, *args: Any, criteria: list[Criterion], experts: Any, initial_answers: dict[str, str],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.criteria = criteria
        self.fields["experts"].queryset = experts
        self.fields["experts"].label_from_instance = lambda p: p.user.get_username()
        for criterion in criteria:
            self.fields[f"answer_{criterion.key}"] = forms.ChoiceField(
                choices=[("", "not in the key"), ("pass", "pass"), ("fail", "fail")], required=False,
                initial=initial_answers.get(criterion.key, ""), label=f"{criterion.key}: {criterion.description}",
                widget=forms.RadioSelect)

    def answer_fields(self) -> list[tuple[Criterion, Any]]:
        return [(c, self[f"answer_{c.key}"]) for c in self.criteria]

    def answers(self) -> dict[str, str]:
        return {c.key: self.cleaned_data[f"answer_{c.key}"] for c in self.criteria
                if self.cleaned_data.get(f"answer_{c.key}")}


# --------------------------------------------------------------------------------------------------------
# Grade page input
# --------------------------------------------------------------------------------------------------------


class GradeInput:
    """The grade page's answers, parsed; ``posted`` keeps what was typed to re-display it on error."""

    def __init__(self, verdicts: dict[int, VerdictInput], overall: str, feedback: str,
                 visible_seconds: float | None) -> None:
        self.verdicts = verdicts
        self.overall = overall
        self.feedback = feedback
        self.visible_seconds = visible_seconds

    @property
    def posted(self) -> dict[int, tuple[str, str]]:
        return {pk: (v.verdict, v.feedback) for pk, v in self.verdicts.items()}

    def kwargs(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts, "overall": self.overall, "feedback": self.feedback,
                "visible_seconds": self.visible_seconds}


def _seconds(value: Any) -> float | None:
    if value in (None, ""):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds == seconds and seconds >= 0 else None  # NaN check


def _text(value: Any, limit: int = 10_000) -> str:
    return str(value or "")[:limit]


def grade_input_from_post(data: Any, criterion_ids: list[int]) -> GradeInput:
    """Read ``verdict_<id>``, ``feedback_<id>``, ``overall``, ``feedback`` and ``visible_seconds``."""
    verdicts = {pk: VerdictInput(verdict=_text(data.get(f"verdict_{pk}"), 8),
                                 feedback=_text(data.get(f"feedback_{pk}")))
                for pk in criterion_ids}
    return GradeInput(verdicts, _text(data.get("overall"), 16), _text(data.get("feedback")),
                      _seconds(data.get("visible_seconds")))


def grade_input_from_json(body: bytes) -> GradeInput:
    """Parse the autosave payload ``{"verdicts": {"<id>": {"verdict", "feedback"}}, "overall", ...}``."""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ValueError("The autosave payload is not JSON.")
    if not isinstance(data, dict) or not isinstance(data.get("verdicts", {}), dict):
        raise ValueError("The autosave payload has the wrong shape.")
    verdicts = {}
    for key, value in data.get("verdicts", {}).items():
        if not str(key).isdigit() or not isinstance(value, dict):
            raise ValueError("The autosave payload has the wrong shape.")
        verdicts[int(key)] = VerdictInput(verdict=_text(value.get("verdict"), 8), feedback=_text(value.get("feedback")))
    return GradeInput(verdicts, _text(data.get("overall"), 16), _text(data.get("feedback")),
                      _seconds(data.get("visible_seconds")))


JUDGEMENTS = ExpertGrade.Judgement.choices

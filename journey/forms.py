"""Forms of the worker journey (input parsing only; the rules live in the services)."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from studies.models import Episode, EpisodeFile, Occupation
from studies.services.episodes import SELF_REPORT_MAX_MINUTES


class SignupForm(UserCreationForm):
    """Account creation from an invitation: a user name and password; e-mail is optional."""

    email = forms.EmailField(required=False, help_text="Optional. Only used if the study team needs to reach you.")

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")

    def __init__(self, *args, password_optional: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.password_optional = password_optional
        if password_optional:
            # The personal links are the credential (they sign the worker back in), so the launch's critical
            # path pays no password hash; a password and a user name only add a way in without the link.
            for name in ("username", "password1", "password2"):
                self.fields[name].required = False
            self.fields["username"].help_text = "Optional. Needed only to sign in with a password."
            self.fields["password1"].help_text = ("Optional. Your personal resume link signs you back in; a "
                                                  "password lets you sign in without it.")

    def clean_username(self):
        if self.password_optional and not self.cleaned_data.get("username"):
            return ""
        return super().clean_username()

    def clean(self):
        cleaned = super().clean()
        if self.password_optional and bool(cleaned.get("password1")) != bool(cleaned.get("password2")):
            self.add_error("password2", "Enter the same password twice, or leave both fields empty.")
        if self.password_optional and cleaned.get("password1") and not cleaned.get("username"):
            self.add_error("username", "Choose a user name to sign in with your password, or leave the password "
                                       "empty.")
        return cleaned


class ConsentForm(forms.Form):
    decision = forms.ChoiceField(choices=[("accept", "I agree"), ("decline", "I do not agree")])
    version = forms.IntegerField(min_value=1)


class ProfileForm(forms.Form):
    occupation = forms.ModelChoiceField(
        queryset=Occupation.objects.all(), error_messages={
            "required": "Please search for your occupation and choose it from the list.",
            "invalid_choice": "That occupation is not in the list; please search again and pick one.",
        },
    )
    # Whole or half years from 0 to 70: the rule the pre-survey's experience question (D3) states and checks.
    years_experience = forms.FloatField(
        min_value=0, max_value=70, step_size=0.5, label="Years of experience in this occupation",
        error_messages={"required": "Please enter your years of experience (0 if you are just starting).",
                        "invalid": "Enter whole or half years, for example 4 or 2.5.",
                        "step_size": "Enter whole or half years, for example 4 or 2.5.",
                        "min_value": "Enter a number of years from 0 to 70.",
                        "max_value": "Enter a number of years from 0 to 70."},
    )

    def clean_years_experience(self) -> float:
        return float(self.cleaned_data["years_experience"])

    def __init__(self, *args, occupations=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if occupations is not None:
            # Only occupations the study can still give tasks to: choosing another would strand the worker.
            self.fields["occupation"].queryset = occupations
            self.fields["occupation"].error_messages["invalid_choice"] = (
                "This study has no task left for that occupation. Please choose the closest other occupation, "
                "or contact the study team."
            )


class SetupForm(forms.Form):
    prior_experience = forms.ChoiceField(
        choices=Episode.PriorExperience.choices, widget=forms.RadioSelect,
        error_messages={"required": "Please say whether you have used this agent before."},
    )
    ready = forms.BooleanField(required=False)


class SetupFailedForm(forms.Form):
    description = forms.CharField(
        max_length=5000, min_length=10,
        error_messages={"required": "Please describe what went wrong.",
                        "min_length": "Please describe what went wrong in a sentence or two.",
                        "max_length": "Please keep the description under %(limit_value)d characters (yours has "
                                      "%(show_value)d); attach screenshots for the rest."},
    )
    # Skipping cannot be undone, so it is confirmed explicitly (works without script, unlike a dialog).
    confirm = forms.BooleanField(error_messages={
        "required": "Please tick the box to confirm that this task should be skipped.",
    })

    def clean(self) -> dict:
        # Every missing part is named on the first try, screenshots included (they arrive as files).
        cleaned = super().clean()
        if not self.files.getlist("screenshots"):
            self.add_error(None, "Please attach at least one screenshot of the setup problem.")
        return cleaned


class OutsideExpertiseForm(forms.Form):
    reason = forms.CharField(
        max_length=2000, min_length=10,
        error_messages={"required": "Please say why this task is outside your expertise.",
                        "min_length": "Please say in a sentence why this task is outside your expertise.",
                        "max_length": "Please keep the reason under %(limit_value)d characters (yours has "
                                      "%(show_value)d)."},
    )
    confirm = forms.BooleanField(error_messages={
        "required": "Please tick the box to confirm that this task should be skipped.",
    })


NOTES_MAX_LENGTH = 5000


class LogForm(forms.Form):
    share_url = forms.CharField(max_length=600, required=False, strip=True, error_messages={
        "max_length": "That link is longer than %(limit_value)d characters; please paste the share link only.",
    })
    notes = forms.CharField(max_length=NOTES_MAX_LENGTH, required=False, error_messages={
        "max_length": "Notes can be at most %(limit_value)d characters; yours have %(show_value)d. Please shorten "
                      "them (or upload longer notes as a log file).",
    })


class SoloForm(forms.Form):
    """A solo task's honest "I used an AI tool anyway" answer and its notes (the solo task's log panel)."""

    used_ai_anyway = forms.BooleanField(required=False)
    notes = forms.CharField(max_length=NOTES_MAX_LENGTH, required=False, error_messages={
        "max_length": "Notes can be at most %(limit_value)d characters; yours have %(show_value)d. Please shorten "
                      "them.",
    })


class UploadForm(forms.Form):
    kind = forms.ChoiceField(choices=[(EpisodeFile.Kind.DELIVERABLE, "Deliverable"),
                                      (EpisodeFile.Kind.LOG, "Collaboration log")])
    replace = forms.BooleanField(required=False)


class WithdrawForm(forms.Form):
    reason = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 3}))
    confirm = forms.BooleanField(error_messages={"required": "Please tick the box to confirm you want to withdraw."})


class SubmitForm(forms.Form):
    """The review page's optional "how many minutes did you spend on this task" answer."""

    self_reported_minutes = forms.IntegerField(
        required=False, min_value=1, max_value=SELF_REPORT_MAX_MINUTES,
        label="About how many minutes did you spend on this task? (optional)",
        error_messages={
            "invalid": "Enter the minutes as a whole number, for example 45, or leave the field empty.",
            "min_value": f"Enter a number of minutes from 1 to {SELF_REPORT_MAX_MINUTES:,}, or leave the field empty.",
            "max_value": f"Enter a number of minutes from 1 to {SELF_REPORT_MAX_MINUTES:,} (that is 40 hours), or "
                         "leave the field empty.",
        },
    )

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm

from accounts.services import token_days_refusal, token_project_allowed, token_projects
from accounts.signin_throttle import client_ip, refusal_message, signin_failed, signin_wait_seconds


class SignInForm(AuthenticationForm):
    """The login form, refused after too many failed attempts (see accounts.signin_throttle)."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn't match. Please try again.",
    }
    throttled = False

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        ip = client_ip(self.request)
        wait = signin_wait_seconds(username=username, ip=ip)
        if wait:
            self.throttled = True
            raise forms.ValidationError(refusal_message(wait), code="throttled")
        try:
            return super().clean()
        except forms.ValidationError:
            if self.user_cache is None:  # a wrong password (not an inactive account's right one)
                signin_failed(username=username, ip=ip)
            raise


class ChatIdentityForm(forms.Form):
    """A Slack member mapped to one of a project's people (on the projects page)."""

    member_id = forms.CharField(max_length=64, label="Slack member ID", help_text="e.g. U024BE7LH")
    username = forms.ChoiceField(label="Acts as")

    def __init__(self, *args, people: list[str] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["username"].choices = [(name, name) for name in people]


class ApiTokenForm(forms.Form):
    """A new API token on the tokens page; its rules are the API's (accounts.services)."""

    name = forms.CharField(max_length=100, label="Name", help_text="What it is for, e.g. nightly export.")
    days = forms.IntegerField(label="Expires after (days)", required=False, min_value=1)
    project = forms.ModelChoiceField(
        queryset=None, required=False, to_field_name="slug", label="Limited to",
        empty_label="Every project you see",
        help_text="Limited to a project, it sees that project only, with your role there.",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["project"].queryset = token_projects(user)
        self.fields["days"].help_text = (f"Empty: {settings.API_TOKEN_DAYS} days, the longest this site allows."
                                         if settings.API_TOKEN_DAYS else "Empty: it never expires.")
        if settings.API_TOKEN_DAYS:
            self.fields["days"].widget.attrs["max"] = settings.API_TOKEN_DAYS

    def clean_days(self):
        days = self.cleaned_data["days"]
        if days is not None and (refusal := token_days_refusal(days)):
            raise forms.ValidationError(refusal)
        return days

    def clean_project(self):
        project = self.cleaned_data["project"]
        if not token_project_allowed(self.user, project):
            raise forms.ValidationError("You have no role in that project.")
        return project

from django import forms
from django.contrib.auth.forms import AuthenticationForm

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

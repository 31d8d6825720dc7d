"""The form that registers a notification receiver."""
from django import forms

from projects.choices import project_field_clean, project_field_prepare
from projects.models import Project
from runs.models import Webhook
from toolsapp import net


class WebhookForm(forms.Form):
    project = forms.ModelChoiceField(
        queryset=Project.objects.none(), help_text="It receives this project's notifications only.",
    )
    url = forms.URLField(
        max_length=2000, label="URL", assume_scheme="https",
        help_text="Where each notification is POSTed as JSON (http or https). A private or local address is "
                  "refused unless OUTBOUND_ALLOWLIST names it.",
    )
    description = forms.CharField(required=False, max_length=200, help_text="Who receives it (optional).")

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        project_field_prepare(self, user, "runs.add_webhook")

    def clean(self):
        cleaned = super().clean()
        project_field_clean(self, cleaned, self.user, "runs.add_webhook")
        return cleaned

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        if Webhook.objects.filter(url=url).exists():
            raise forms.ValidationError("This URL is registered already.")
        try:
            net.check_url(url)
        except net.Blocked as exc:
            raise forms.ValidationError(f"Refused: {exc}.") from None
        return url

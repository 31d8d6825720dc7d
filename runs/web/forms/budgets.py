"""The budgets page's forms: a budget (its scope names one agent or one person, or neither), and a
raise made from the queue where a run waits on a spent budget."""
import math
from datetime import timedelta

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from runs.models import Agent, Budget


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = ["name", "scope", "agent", "person", "measure", "period", "limit", "alert_share", "enabled"]
        labels = {"limit": "Limit", "alert_share": "Warn at (share of the limit)", "person": "Person who launches"}
        help_texts = {
            "agent": "For \u201cone agent's runs\u201d only.",
            "person": "For \u201cruns one person launches\u201d only.",
            "alert_share": "0.8 warns by webhook and e-mail at 80 %, once a period.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = Agent.objects.order_by("name")
        self.fields["person"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["limit"].widget.attrs.update(min="0", step="any")
        self.fields["alert_share"].widget.attrs.update(min="0.01", max="1", step="0.01")

    def clean_limit(self):
        limit = self.cleaned_data["limit"]
        if not math.isfinite(limit) or limit < 0:
            raise forms.ValidationError("A number, 0 or more.")
        return limit

    def clean_alert_share(self):
        share = self.cleaned_data["alert_share"]
        if not math.isfinite(share) or not 0 < share <= 1:
            raise forms.ValidationError("A share above 0, at most 1 (0.8 is 80 %).")
        return share

    def clean(self):
        data = super().clean()
        scope = data.get("scope")
        if scope == Budget.Scope.AGENT and not data.get("agent"):
            self.add_error("agent", "Choose the agent whose runs this budget covers.")
        if scope == Budget.Scope.PERSON and not data.get("person"):
            self.add_error("person", "Choose the person whose runs this budget covers.")
        if scope != Budget.Scope.AGENT:
            data["agent"] = None
        if scope != Budget.Scope.PERSON:
            data["person"] = None
        limit = data.get("limit")
        if data.get("measure") == Budget.Measure.RUNS and limit is not None and not float(limit).is_integer():
            self.add_error("limit", "A whole number of runs.")
        return data


class BudgetRaiseForm(forms.Form):
    limit = forms.FloatField(label="New limit")
    until = forms.DateTimeField(label="Until", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
                                input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"])
    applies_to = forms.ChoiceField(choices=[("run", "This run only"), ("all", "Every run of this budget")],
                                   initial="run", widget=forms.RadioSelect)
    run = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def clean_limit(self):
        limit = self.cleaned_data["limit"]
        if not math.isfinite(limit) or limit < 0:
            raise forms.ValidationError("A number, 0 or more.")
        return limit

    def clean_until(self):
        until = self.cleaned_data["until"]
        if until <= timezone.now():
            raise forms.ValidationError("A time still to come.")
        if until - timezone.now() > timedelta(days=366):
            raise forms.ValidationError("At most a year from now: change the budget itself for longer.")
        return until

    def clean(self):
        data = super().clean()
        if data.get("applies_to") == "run" and not data.get("run"):
            self.add_error("applies_to", "Which run? Raise it from the run's request in the queue.")
        return data

"""Forms of the history and metrics filters."""
from datetime import timedelta

from django import forms

from projects.access import scoped, visible_projects
from runs.lifecycle.run_marks import DECISION_CHOICES
from runs.models import Agent, Run
from runs.observability.metrics.page import default_period

MAX_METRICS_DAYS = 366


class DateInput(forms.DateInput):
    input_type = "date"


class HistoryFilterForm(forms.Form):
    """GET filters of the run history. Blank fields do not filter."""

    q = forms.CharField(
        label="Search", required=False, max_length=200,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "a task, an answer, a tool result"}),
        help_text="Ended runs' answers and tool results too (3 characters or more).",
    )
    status = forms.ChoiceField(required=False, choices=[("", "any")] + Run.Status.choices)
    stop_reason = forms.ChoiceField(required=False, choices=[("", "any")] + Run.StopReason.choices)
    decisions = forms.ChoiceField(
        label="People's decisions", required=False, choices=[("", "any")] + DECISION_CHOICES,
        help_text="Runs where a person or a rule rejected a call, or approved it with edited arguments.",
    )
    agent = forms.ModelChoiceField(required=False, queryset=Agent.objects.only("pk", "name"), empty_label="any")
    model = forms.CharField(
        required=False, max_length=200, widget=forms.TextInput(attrs={"list": "known-models"}),
        help_text="Runs with a step answered by this model (or by a known one whose name contains it).",
    )
    tool = forms.CharField(
        required=False, max_length=64, widget=forms.TextInput(attrs={"list": "known-tools"}),
        help_text="Runs with a call to this tool (or to a known one whose name contains it: cancel).",
    )
    created_from = forms.DateField(label="From", required=False, widget=DateInput)
    created_to = forms.DateField(label="To", required=False, widget=DateInput, help_text="Included.")
    experiments = forms.ChoiceField(
        required=False, label="Experiments", choices=[("", "hidden"), ("include", "included"), ("only", "only")],
        help_text="Runs of experiments (cases of a dataset, nothing real changed).",
    )

    def __init__(self, data=None, *args, user=None, **kwargs):
        super().__init__(data, *args, **kwargs)
        # A person of some projects only filters, and gets, those projects' runs.
        self.projects = visible_projects(user) if user is not None else None
        if self.projects is not None:
            self.fields["agent"].queryset = scoped(self.fields["agent"].queryset, user)

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("created_from"), cleaned.get("created_to")
        if start and end and start > end:
            self.add_error("created_to", "The end date is before the start date.")
        return cleaned

    def filters(self) -> dict:
        """Keyword arguments for runs.lifecycle.run_list.run_history."""
        data = self.cleaned_data
        return {
            "text": data["q"].strip(),
            "status": data["status"],
            "stop_reason": data["stop_reason"],
            "agent": data["agent"],
            "model": data["model"].strip(),
            "tool": data["tool"].strip(),
            "created_from": data["created_from"],
            "created_to": data["created_to"],
            "experiments": data["experiments"] or "hide",
            "projects": self.projects,
            "decisions": data["decisions"],
        }


class MetricsFilterForm(forms.Form):
    date_from = forms.DateField(label="From", required=False, widget=DateInput)
    date_to = forms.DateField(label="To", required=False, widget=DateInput, help_text="Included.")
    agent = forms.ModelChoiceField(required=False, queryset=Agent.objects.only("pk", "name"), empty_label="all agents")

    def __init__(self, data=None, *args, user=None, **kwargs):
        if data is not None and not data.get("date_from") and not data.get("date_to"):
            # Show the default period in the date inputs, not empty inputs.
            start, end = default_period()
            data = data.copy()
            data["date_from"], data["date_to"] = start.isoformat(), end.isoformat()
        super().__init__(data, *args, **kwargs)
        if user is not None and visible_projects(user) is not None:
            # The figures of every agent would count other projects' runs: a person of some
            # projects reads them agent by agent, their first agent's unless they choose.
            agents = scoped(self.fields["agent"].queryset, user).order_by("name")
            field = self.fields["agent"]
            field.queryset, field.required, field.empty_label = agents, True, None
            if self.is_bound and not self.data.get("agent") and agents.exists():
                self.data = self.data.copy()
                self.data["agent"] = str(agents.first().pk)

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        default_start, default_end = default_period()
        end = cleaned.get("date_to") or default_end
        start = cleaned.get("date_from") or (end - (default_end - default_start))
        if start > end:
            self.add_error("date_to", "The end date is before the start date.")
        elif (end - start) >= timedelta(days=MAX_METRICS_DAYS):
            self.add_error("date_from", f"Choose at most {MAX_METRICS_DAYS} days.")
        cleaned["date_from"], cleaned["date_to"] = start, end
        return cleaned

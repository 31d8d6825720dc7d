"""Forms of the history and metrics filters and of the agent editor."""
import json
from datetime import timedelta

from django import forms
from django.db.models import Q

from projects.access import scoped, visible_projects
from projects.choices import project_field_clean, project_field_prepare
from projects.models import Project
from runs.lifecycle.agents import AGENT_FIELDS, agent_draft_save, agent_errors, agent_save
from runs.models import Agent, Run
from runs.observability.metrics.page import default_period
from toolsapp.models import Tool
from toolsapp.text import JsonTooDeep
from toolsapp.text import loads as bounded_loads
from toolsapp.verifiers import VERIFIERS

MAX_METRICS_DAYS = 366


def split_commas(value: str) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


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


class JSONObjectField(forms.CharField):
    """A JSON object typed into a textarea, shown indented."""

    widget = forms.Textarea

    def prepare_value(self, value):
        if isinstance(value, (dict, list)):
            return json.dumps(value, indent=2, ensure_ascii=False)
        return value

    def to_python(self, value):
        text = super().to_python(value).strip()
        if not text:
            return {}
        try:
            parsed = bounded_loads(text)
        except JsonTooDeep as exc:
            raise forms.ValidationError(f"Not accepted: {exc}.") from None
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        if not isinstance(parsed, dict):
            raise forms.ValidationError("This must be a JSON object ({...}).")
        return parsed


class CommaListField(forms.CharField):
    """A list of names typed as "a, b, c"."""

    def prepare_value(self, value):
        if isinstance(value, (list, tuple)):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value):
        return split_commas(super().to_python(value))


class AgentForm(forms.ModelForm):
    """The agent editor. It reads the fields' text; every rule on the values is agent_save's."""

    model_list = CommaListField(
        label="Models", required=False, help_text="Comma separated, tried in order; empty uses LLM_MODELS."
    )
    base_url = forms.URLField(
        required=False, help_text="OpenAI-compatible endpoint (http or https); empty uses LLM_BASE_URL."
    )
    tools = forms.ModelMultipleChoiceField(
        required=False, queryset=Tool.objects.order_by("name"), widget=forms.CheckboxSelectMultiple
    )
    provider_options = JSONObjectField(
        required=False, help_text="A JSON object passed through to the API, e.g. OpenRouter's models/provider."
    )
    verifier = forms.ChoiceField(required=False)
    project = forms.ModelChoiceField(
        queryset=Project.objects.none(), empty_label=None,
        help_text="The team whose agent it is: who sees its runs and decides its calls. Set when it is created.",
    )

    class Meta:
        model = Agent
        fields = list(AGENT_FIELDS)
        labels = {"max_cost_usd": "Max cost (USD)"}
        help_texts = {
            "max_output_tokens": "Per model call; empty uses the default.",
            "context_budget_tokens": "Tokens one request may carry; empty: the models' context window "
                                     "(LLM_CONTEXT_LENGTHS) less the answer's cap and 5 %.",
            "approval_timeout_seconds": "Empty uses APPROVAL_TIMEOUT_SECONDS.",
        }
        widgets = {"description": forms.Textarea(attrs={"rows": 2}), "system_prompt": forms.Textarea(attrs={"rows": 6})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["verifier"].choices = [("", "none")] + [(name, name) for name in sorted(VERIFIERS)]
        tools = self.fields["tools"]
        if self.instance.pk is not None or user is None:
            del self.fields["project"]
            if self.instance.pk is not None:
                # Its project's tools and the site's shared ones (a tool of another team is refused).
                tools.queryset = tools.queryset.filter(Q(project__isnull=True) | Q(project=self.instance.project_id))
        else:
            project_field_prepare(self, user, "runs.add_agent")
            tools.queryset = scoped(tools.queryset, user, shared=True)
        self.user = user

    def clean(self):
        cleaned = super().clean()
        project_field_clean(self, cleaned, self.user, "runs.add_agent")
        return cleaned
        self.fields["tools"].label_from_instance = lambda tool: tool.name if tool.enabled else f"{tool.name} (disabled)"

    def _post_clean(self):
        # Instead of ModelForm's model validation: the service's, which includes the model's.
        errors = agent_errors(agent=self._agent(), data=self._settings(), project=self.cleaned_data.get("project"))
        for name, messages in errors.items():
            if name not in self.errors:  # a field whose text could not be read already says so
                self.add_error(name if name in self.fields else None, messages)

    def _agent(self) -> Agent | None:
        return self.instance if self.instance.pk is not None else None

    def _settings(self) -> dict:
        return {name: value for name, value in self.cleaned_data.items() if name != "project"}

    def save(self, commit: bool = True, *, user=None) -> Agent:
        self.instance = agent_save(agent=self._agent(), data=self._settings(), user=user,
                                   project=self.cleaned_data.get("project"))
        return self.instance

    def save_draft(self, *, user=None):
        """A draft version of the (existing) agent with these settings; the agent is unchanged."""
        return agent_draft_save(agent=self._agent(), data=self._settings(), user=user)

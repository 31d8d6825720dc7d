"""The dashboard's forms for datasets, cases and experiments. Expectations are edited as JSON
(evals/expectations.py documents the kinds); the services check every value again."""
import json

from django import forms

from evals import services_projects as scope
from evals.expectations import KINDS, expectation_errors
from evals.models import Dataset
from hosting.text import loads
from projects.models import Project
from runs.models import Agent

EXPECTATIONS_HELP = (
    "A JSON list of checks, each with a kind: " + ", ".join(KINDS) + ". Example: "
    '[{"kind": "tool_called", "tool": "cancel_order", "conditions": [{"path": "$.order_id", "op": "eq", '
    '"value": "ORD-1001"}]}, {"kind": "stop_reason", "in": ["final_answer"]}]'
)


class ExpectationsField(forms.CharField):
    """A JSON list of expectations, checked here so the person sees each problem at the field."""

    widget = forms.Textarea(attrs={"rows": 12, "class": "mono", "spellcheck": "false"})

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", EXPECTATIONS_HELP)
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):
            return json.dumps(value, indent=2, ensure_ascii=False)
        return value

    def to_python(self, value):
        text = (value or "").strip()
        if not text:
            return []
        try:
            parsed = loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from exc
        problems = expectation_errors(parsed)
        if problems:
            raise forms.ValidationError(problems)
        return parsed


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=100)
    project = forms.ModelChoiceField(
        queryset=Project.objects.none(), required=False, empty_label="Choose a project",
        help_text="The team whose dataset it is: its cases come from its runs, its experiments run its agents.")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        # The projects where the person may make a dataset; their default one chosen.
        self.fields["project"].queryset = scope.dataset_projects(user)
        self.fields["project"].initial = scope.dataset_project_default(user)


class CaseForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, help_text="Empty: the task's first words.")
    task = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    customer = forms.CharField(max_length=100, required=False)
    expectations = ExpectationsField()


class CaseFromRunForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), required=False, empty_label="a new dataset")
    new_dataset = forms.CharField(max_length=100, required=False, label="New dataset's name",
                                  help_text="When adding to a new dataset.")
    step = forms.TypedChoiceField(coerce=int, label="From step", required=False, empty_value=None,
                                  help_text="The case starts at this step's request; its checks are what the run did from there.")
    with_conversation = forms.BooleanField(
        required=False, initial=True, label="Start from the run's conversation before that step",
        help_text="Off: only the task, and the model works from the start.")
    name = forms.CharField(max_length=200, required=False)
    expectations = ExpectationsField(help_text="Prefilled from what the run did: edit them. " + EXPECTATIONS_HELP)

    def __init__(self, *args, datasets, steps: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = datasets  # the run's project's (evals.services_projects.datasets_for)
        self.fields["step"].choices = [("", "the start (the task only)")] + [
            (str(n), f"step {n}") for n in range(2, steps + 1)]

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("dataset") and not (cleaned.get("new_dataset") or "").strip():
            self.add_error("new_dataset", "Choose a dataset, or name a new one.")
        return cleaned


VERSION_CHOICES = [("current", "The current version"), ("draft", "The newest draft"), ("number", "Version number…")]


class ExperimentForm(forms.Form):
    agent = forms.ModelChoiceField(queryset=Agent.objects.none())
    which = forms.ChoiceField(choices=VERSION_CHOICES, initial="current", label="Version")
    version = forms.IntegerField(required=False, min_value=1, label="Version number",
                                 help_text="With \"Version number…\".")
    models = forms.CharField(required=False, max_length=1000, label="Models instead of the version's",
                             help_text="Comma separated, in fallback order; empty: the version's own.")

    def __init__(self, *args, agents, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents  # the dataset's project's (evals.services_projects.agents_for)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("which") == "number" and not cleaned.get("version"):
            self.add_error("version", "Give the version's number.")
        return cleaned

    def model_list(self) -> list[str]:
        return [m.strip() for m in (self.cleaned_data.get("models") or "").split(",") if m.strip()]


class ImportForm(forms.Form):
    file = forms.FileField(label="JSONL file", help_text="One case per line, as the export writes them.")

"""The agent editor's form: it reads the fields' text, and agent_save holds every rule on the values."""
import json

from django import forms
from django.db.models import Q

from hosting.text import JsonTooDeep
from hosting.text import loads as bounded_loads
from projects.access import scoped
from projects.choices import project_field_clean, project_field_prepare
from projects.models import Project
from runs.lifecycle.agents import AGENT_FIELDS, agent_draft_save, agent_errors, agent_save
from runs.models import Agent
from toolsapp.models import Tool
from toolsapp.verifiers import VERIFIERS


def split_commas(value: str) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


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
        # A disabled tool stays choosable (an agent may keep it for later) but says so.
        tools.label_from_instance = lambda tool: tool.name if tool.enabled else f"{tool.name} (disabled)"

    def clean(self):
        cleaned = super().clean()
        project_field_clean(self, cleaned, self.user, "runs.add_agent")
        return cleaned

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

"""Launching a run: an agent, a task, and the settings this one launch changes."""
from django import forms

from runs.models import Agent, ToolChoice
from runs.selectors.runs import agent_defaults, agents_for_launch, enabled_tool_names
from runs.services.guards import MAX_SAFE_INTEGER

LIMIT_FIELDS = ("max_iterations", "repeat_limit", "max_wall_seconds", "max_tokens", "max_cost_usd")
TOOL_CHOICE_FIELDS = ("first_tool_choice", "later_tool_choice")
AGENT_DEFAULT = [("", "the agent's setting")]


def _positive_float(name: str):
    def clean(self):
        value = self.cleaned_data.get(name)
        if value is not None and value <= 0:
            raise forms.ValidationError("Enter a number greater than 0.")
        return value

    return clean


class LaunchForm(forms.Form):
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), empty_label=None)
    task = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "e.g. What's the weather in Lagos and London?"}),
        max_length=20_000,
    )
    customer = forms.CharField(
        required=False, max_length=100, help_text="Whose data the tools may touch; empty uses the default."
    )
    models = forms.CharField(
        required=False,
        max_length=2000,
        label="Models",
        help_text="Comma separated, tried in this order; empty uses the agent's.",
    )
    tools = forms.MultipleChoiceField(
        required=False, choices=(), help_text="Enabled tools this run may call; none selected uses the agent's."
    )
    max_iterations = forms.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    repeat_limit = forms.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    max_wall_seconds = forms.FloatField(required=False, label="Max wall seconds")
    max_tokens = forms.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    max_cost_usd = forms.FloatField(required=False, label="Max cost (USD)")
    first_tool_choice = forms.ChoiceField(required=False, choices=AGENT_DEFAULT + list(ToolChoice.choices))
    later_tool_choice = forms.ChoiceField(required=False, choices=AGENT_DEFAULT + list(ToolChoice.choices))

    clean_max_wall_seconds = _positive_float("max_wall_seconds")
    clean_max_cost_usd = _positive_float("max_cost_usd")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].queryset = agents_for_launch()
        self.fields["tools"].choices = [(name, name) for name in enabled_tool_names()]
        self.fields["tools"].widget.attrs["size"] = min(10, max(3, len(self.fields["tools"].choices)))

    def limit_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in LIMIT_FIELDS + TOOL_CHOICE_FIELDS]

    def clean_models(self) -> list[str] | None:
        text = self.cleaned_data["models"].strip()
        if not text:
            return None
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names:
            raise forms.ValidationError("Enter model names separated by commas, or leave this empty.")
        return names

    def overrides(self) -> dict:
        """The settings that differ from the agent's: a field left empty, or set to what the
        agent already has, is not an override (so a later change to the agent still applies
        to re-runs of this launch for everything the user did not choose)."""
        data = self.cleaned_data
        defaults = agent_defaults(agents=[data["agent"]])[str(data["agent"].pk)]
        chosen = {
            "models": data["models"],
            "tools": sorted(data["tools"]) or None,
            **{name: data[name] for name in LIMIT_FIELDS},
            **{name: data[name] or None for name in TOOL_CHOICE_FIELDS},
        }
        return {name: value for name, value in chosen.items() if value is not None and value != defaults[name]}

"""Launching a run: an agent, a task, and the settings this one launch changes."""
from django import forms

from hosting.text import MAX_SAFE_INTEGER
from projects.access import may, projects_with
from projects.current import current_project
from projects.empty_lists import nothing_yet
from projects.models import Project
from runs.engine.guards import POSITIVE_INT_LIMITS
from runs.lifecycle.launch_rules import (
    LIMIT_SETTINGS,
    POLICY_LABELS,
    TOOL_CHOICE_SETTINGS,
    LaunchNotAllowed,
    customer_problem,
    launch_overrides,
    launch_policy,
)
from runs.lifecycle.run_reads import agents_for_launch, enabled_tool_names
from runs.lifecycle.runs import launch_errors
from runs.models import Agent, ToolChoice
from runs.roles import PERM_ADD_AGENT, PERM_LAUNCH

AGENT_DEFAULT = [("", "the agent's setting")]
LABELS = {"max_cost_usd": "Max cost (USD)"}


def setting_field(name: str) -> forms.Field:
    """The launch page's field for one limit or tool choice; left empty, the agent's setting applies."""
    if name in TOOL_CHOICE_SETTINGS:
        return forms.ChoiceField(required=False, choices=AGENT_DEFAULT + list(ToolChoice.choices))
    if name in POSITIVE_INT_LIMITS:
        return forms.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    return forms.FloatField(required=False, label=LABELS.get(name))


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
        required=False, choices=(),
        help_text="Which of the agent's tools this run may call; none selected uses all the agent's.",
    )
    approval_policy = forms.ChoiceField(
        required=False, initial="ask", choices=list(POLICY_LABELS.items()), label="Destructive calls",
        help_text="Only people an administrator allowed to launch without approvals may choose \u201capprove "
                  "every destructive call automatically\u201d: no role has that right by default, superusers do.",
    )
    # ...then one field per limit and tool choice (LIMIT_SETTINGS, TOOL_CHOICE_SETTINGS), added below.

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user  # whose overrides must stay within the agent
        for name in LIMIT_SETTINGS + TOOL_CHOICE_SETTINGS:
            self.fields[name] = setting_field(name)
        self._agents_offered(user)
        self.fields["tools"].choices = [(name, name) for name in enabled_tool_names(user)]
        self.fields["tools"].widget.attrs["size"] = min(10, max(3, len(self.fields["tools"].choices)))

    def _agents_offered(self, user) -> None:
        """The agents of the projects where the person launches, named with their project when
        there are several; the project they work in first chosen; none: what is missing, and who
        can add one, instead of an empty list and "This field is required."."""
        field = self.fields["agent"]
        agents = list(agents_for_launch(user).select_related("project"))
        field.queryset = agents_for_launch(user).select_related("project")
        current = current_project(user)
        if len({agent.project_id for agent in agents}) > 1:
            field.label_from_instance = lambda agent: f"{agent.name} ({agent.project.name})"
        if not self.initial.get("agent"):
            self.initial["agent"] = next((a.pk for a in agents if current and a.project_id == current.pk), None)
        self.nothing_yet, self.nothing_yet_project = "", None
        if not agents:
            project = current if current is not None and may(user, PERM_LAUNCH, current.pk) else None
            if project is None:
                allowed = projects_with(user, PERM_LAUNCH)
                project = Project.objects.filter(**({} if allowed is None else {"pk__in": allowed})).order_by("name").first()
            if project is not None:
                self.nothing_yet = nothing_yet(project=project, things="agents", user=user, perm=PERM_ADD_AGENT)
                # Those who may add one there are shown where: the agent editor, or a copy.
                self.nothing_yet_project = project if may(user, PERM_ADD_AGENT, project.pk) else None
                field.error_messages["required"] = self.nothing_yet
                field.widget.attrs["aria-describedby"] = "agents-nothing-yet"  # the note below it

    def limit_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in LIMIT_SETTINGS + TOOL_CHOICE_SETTINGS]

    def clean_models(self) -> list[str] | None:
        text = self.cleaned_data["models"].strip()
        if not text:
            return None
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names:
            raise forms.ValidationError("Enter model names separated by commas, or leave this empty.")
        return names

    def clean_customer(self) -> str:
        customer = self.cleaned_data["customer"].strip()
        problem = customer_problem(customer)
        if problem:
            raise forms.ValidationError(problem[0].upper() + problem[1:] + ".")
        return customer

    def clean_approval_policy(self) -> str:
        try:
            return launch_policy(user=self.user, requested=self.cleaned_data["approval_policy"])
        except LaunchNotAllowed as exc:
            raise forms.ValidationError(str(exc))

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("agent") is not None:
            errors = launch_errors(agent=cleaned["agent"], overrides=self.overrides(), user=self.user)
            for setting, messages in errors.items():
                self.add_error(setting, messages)
        return cleaned

    def overrides(self) -> dict:
        """The settings that differ from the agent's (launch_overrides); empty fields are not chosen."""
        data = self.cleaned_data
        chosen = {
            "models": data.get("models"),
            "tools": data.get("tools") or None,
            **{name: data.get(name) for name in LIMIT_SETTINGS},
            **{name: data.get(name) or None for name in TOOL_CHOICE_SETTINGS},
        }
        return launch_overrides(agent=data["agent"], chosen=chosen)

"""The approval rule editor. The form reads text, numbers and choices; rule_errors
(runs.supervision.rules.changes) decides what a rule may be, for this form and the API alike."""
import json

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.forms.models import ModelChoiceIterator

from hosting.text import loads as bounded_loads
from projects.access import projects_with, scoped
from projects.choices import people_of, project_field_clean, project_field_prepare
from projects.empty_lists import missing_note
from projects.models import Project
from runs.models import Agent, ApprovalRule
from runs.roles import PERM_ADD_RULES
from runs.supervision.approvals.quorum import MAX_APPROVALS
from runs.supervision.rules.changes import MAX_INT, RULE_FIELDS, rule_errors
from runs.supervision.rules.conditions import OPERATORS
from runs.supervision.rules.saved_over import confirmed_ids
from toolsapp.models import Tool

MAX_CONDITIONS_TEXT = 20_000
CONDITIONS_HELP = (
    'A JSON list; every condition must hold. Each is {"path": "$.amount", "op": "lt", "value": 50}. '
    'Operators: eq, ne, lt, gt, in (a list: ["a", "b"]), fullmatch (the whole value matches an RE2 pattern), '
    'matches (the value contains a match of an RE2 pattern somewhere: "@example\\.com" also accepts '
    '"x@evil.test,y@example.com"), present, absent, outside (comes from outside content; no value). '
    'The value "$run.customer" stands for the run\'s customer. Empty: any arguments.'
)


KEEP_UNRESOLVED = "unresolved"


class _LauncherChoices(ModelChoiceIterator):
    def __iter__(self):
        if self.field.unresolved:
            yield (KEEP_UNRESOLVED, f"nobody: {self.field.unresolved!r} matched no account")
        yield from super().__iter__()


class LauncherField(forms.ModelChoiceField):
    """Who launched the run, chosen from the accounts (shown by their current username). A rule
    whose launcher name matched no account when rules moved to accounts offers to stay as it is."""

    iterator = _LauncherChoices

    def __init__(self, *, unresolved: str = ""):
        self.unresolved = unresolved
        help_text = "Only runs this account launched; anyone: any run, also those launched from the CLI or a schedule."
        if unresolved:
            help_text = (f"This rule named {unresolved!r}, which matched no account when rules moved to accounts, "
                         f"so it matches no run. Choose the account it means, or anyone. {help_text}")
        super().__init__(
            queryset=get_user_model().objects.order_by("username"), required=False, empty_label="anyone",
            label="Launched by", help_text=help_text,
        )

    def label_from_instance(self, obj) -> str:
        return obj.get_username() if obj.is_active else f"{obj.get_username()} (inactive)"

    def to_python(self, value):
        if self.unresolved and value == KEEP_UNRESOLVED:
            return KEEP_UNRESOLVED
        return super().to_python(value)


class RuleForm(forms.Form):
    project = forms.ModelChoiceField(
        queryset=Project.objects.none(), empty_label=None,
        help_text="The rule decides this project's calls only. Set when it is created.",
    )
    name = forms.CharField(max_length=200, help_text="Shown with every decision the rule makes.")
    agent = forms.ModelChoiceField(
        required=False, queryset=Agent.objects.only("pk", "name").order_by("name"), empty_label="every agent",
        help_text="Only runs of this agent.",
    )
    position = forms.IntegerField(initial=100, min_value=-MAX_INT - 1, max_value=MAX_INT, help_text="Rules are tried from the lowest position; the first that matches decides.")
    enabled = forms.BooleanField(required=False, initial=True)
    shadow = forms.BooleanField(
        required=False, label="In shadow",
        help_text="Decides nothing: records what it would have decided about every live call, for comparison with "
        "what people decided (shown on this page once saved).",
    )
    tool_pattern = forms.CharField(
        max_length=200, initial="*", label="Tool", help_text="A tool name, or a pattern with * and ? (refund_*).",
        widget=forms.TextInput(attrs={"list": "rule-tool-suggestions", "autocomplete": "off"}),
    )
    conditions = forms.CharField(
        required=False, max_length=MAX_CONDITIONS_TEXT, label="Conditions on the arguments",
        widget=forms.Textarea(attrs={"rows": 5, "class": "mono", "spellcheck": "false", "data-operators": json.dumps(OPERATORS)}),
        help_text=CONDITIONS_HELP,
    )
    customer = forms.CharField(required=False, max_length=100, help_text="Only runs for this customer; empty: any.")
    launched_by = LauncherField()
    action = forms.ChoiceField(choices=ApprovalRule.Action.choices, initial=ApprovalRule.Action.ASK)
    group = forms.ModelChoiceField(
        required=False, queryset=Group.objects.order_by("name"), empty_label="—",
        help_text="With 'Ask a named group': only its members decide.",
    )
    approvals_needed = forms.IntegerField(
        required=False, min_value=2, max_value=MAX_APPROVALS, label="Approvals needed",
        help_text="With 'Ask several people': how many different people must approve (one rejection ends it).",
    )
    quorum_groups = forms.ModelMultipleChoiceField(
        required=False, queryset=Group.objects.order_by("name"), label="One approval from each of",
        widget=forms.CheckboxSelectMultiple,
        help_text="With 'Ask several people': each chosen group must give one of the approvals, each from a different "
        "person; only their members decide. None chosen: any people who may decide.",
    )
    reason = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="With 'Reject automatically': what the model is told.",
    )
    escalate_after_seconds = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_INT, label="Escalate after (seconds)",
        help_text="Calls this rule sends to people escalate after this long; empty: the agent's setting.",
    )
    expiry_warning_seconds = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_INT, label="Warn before expiry (seconds)",
        help_text="Calls this rule sends to people warn this long before they expire (webhook, e-mail, the queue's "
        "badge); empty: the agent's setting.",
    )
    # The approval ids of the calls people rejected that the rule would have approved, as the
    # person confirmed them after reading them (runs.supervision.rules.backtest.saved_over_check).
    # Shown with those calls, not among the rule's fields (_rule_backtest.html).
    confirm_saved_over = forms.CharField(required=False, max_length=1_000_000, label="Save over these calls")

    def __init__(self, *args, rule: ApprovalRule | None = None, user=None, **kwargs):
        self.rule = rule
        if rule is not None and rule.pk and kwargs.get("initial") is None:
            kwargs["initial"] = rule_initial(rule)
        super().__init__(*args, **kwargs)
        if rule is not None or user is None:
            del self.fields["project"]  # a rule stays in the project it was made in
            if rule is not None:
                self.fields["agent"].queryset = self.fields["agent"].queryset.filter(project_id=rule.project_id)
        else:
            project_field_prepare(self, user, PERM_ADD_RULES)
            self.fields["agent"].queryset = scoped(self.fields["agent"].queryset, user)
        self.user = user
        project = rule.project if rule is not None else self.fields["project"].initial if "project" in self.fields else None
        self.agents_missing = missing_note(self, project=project, user=user)
        if rule is not None and rule.launched_by_unresolved:
            self.fields["launched_by"] = LauncherField(unresolved=rule.launched_by_unresolved)
        self._launchers_offered(rule, user)

    def _launchers_offered(self, rule: ApprovalRule | None, user) -> None:
        """"Launched by" offers the people of the rule's project (of a new rule: of the projects
        where the person may add one; the one chosen is checked in clean), not every account of
        the site; a rule keeps the launcher it has."""
        field = self.fields["launched_by"]
        if rule is not None:
            projects = {rule.project_id}
        else:
            projects = projects_with(user, PERM_ADD_RULES) if user is not None else None
        launchers = people_of(projects, field.queryset)
        if rule is not None and rule.launched_by_id:
            launchers = launchers | field.queryset.filter(pk=rule.launched_by_id)
        field.queryset = launchers

    def tool_suggestions(self) -> list[str]:
        """What the tool field offers as one types: every tool, then a pattern per name prefix."""
        names = list(Tool.objects.order_by("name").values_list("name", flat=True))
        prefixes = sorted({name.split("_", 1)[0] + "_*" for name in names if "_" in name})
        return ["*", *names, *prefixes]

    def clean_conditions(self) -> list:
        text = self.cleaned_data["conditions"].strip()
        if not text:
            return []
        try:
            return bounded_loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Conditions are not valid JSON: {exc}.")

    def clean_confirm_saved_over(self) -> set[int]:
        return confirmed_ids(self.cleaned_data["confirm_saved_over"])

    def chosen_project(self):
        """The rule's project: its own, or the one chosen for a new rule."""
        return self.rule.project if self.rule is not None else self.cleaned_data.get("project")

    def clean(self):
        cleaned = super().clean()
        project_field_clean(self, cleaned, self.user, PERM_ADD_RULES)
        self._launcher_of_project(cleaned)
        data = self.rule_data()
        for name, messages in rule_errors(rule=self.rule, data=data, project=self.chosen_project()).items():
            if name in self.errors:
                continue  # the field's own message says it already
            if name in self.fields:
                self.add_error(name, messages)
            else:
                self.add_error(None, messages)
        return cleaned

    def _launcher_of_project(self, cleaned: dict) -> None:
        """A new rule's launcher is one of its chosen project's people; another team's person is
        refused in the words of an account that is not there."""
        launcher, project = cleaned.get("launched_by"), self.chosen_project()
        if self.rule is not None or project is None or not hasattr(launcher, "pk"):
            return  # a rule's own project: its choices are that project's people already
        if not people_of({project.pk}).filter(pk=launcher.pk).exists():
            field = self.fields["launched_by"]
            self.add_error("launched_by", forms.ValidationError(
                field.error_messages["invalid_choice"], code="invalid_choice", params={"value": launcher.pk}))

    def rule_data(self) -> dict:
        """The fields that read cleanly, as rule_create / rule_update take them."""
        data = {name: self.cleaned_data[name] for name in RULE_FIELDS if name in self.cleaned_data}
        if data.get("launched_by") == KEEP_UNRESOLVED:
            del data["launched_by"]  # left as it is: the rule keeps matching nobody
        return data


def rule_initial(rule: ApprovalRule) -> dict:
    initial = {name: getattr(rule, name) for name in RULE_FIELDS if name != "quorum_groups"}
    initial["quorum_groups"] = list(rule.quorum_groups.all()) if rule.pk else []
    initial["launched_by"] = KEEP_UNRESOLVED if rule.launched_by_unresolved else rule.launched_by_id
    initial["conditions"] = json.dumps(rule.conditions, ensure_ascii=False, indent=1) if rule.conditions else ""
    return initial


"""The tool editor: turns what was typed into values (the schema's JSON text, a comma list);
toolsapp.services owns the rules, so the form and the API refuse the same things.

Also which project a tool (or an MCP server) goes into, for the forms and the API: a project where
the person may add and change tools, or none ("shared by the site": every project's agents may
use it), which only people with the tools permissions site-wide may choose (projects/access.py)."""
import json

from django import forms
from django.db import transaction
from django.db.models import Q

from hosting.text import MAX_SAFE_INTEGER, JsonTooDeep
from hosting.text import loads as bounded_loads
from projects import access
from projects.models import DEFAULT_SLUG, Project
from runs.roles import PERM_ADD_TOOL, PERM_MANAGE_TOOLS
from toolsapp.decision_settings import EXAMPLE, decision_settings_problems, decision_settings_save
from toolsapp.executors import ConfigField, config_fields, config_typed, discovery_of, kind_choices
from toolsapp.models import Tool
from toolsapp.services import ToolInvalid, tool_save, tool_validate

# --- A tool's (or an MCP server's) project --------------------------------------------------------

# What putting a tool (or a server, whose discovered tools follow it) into a project takes.
TOOL_PERMS = (PERM_ADD_TOOL, PERM_MANAGE_TOOLS)
SHARED_LABEL = "Shared by the site"
SHARED_HELP = "Empty: shared by the site, for every project's agents (site-wide admins only)."


class ProjectRefused(Exception):
    """Why a tool may not go into the project asked for (or none was asked and none can be chosen)."""


def tool_projects_allowed(user) -> set[int] | None:
    """The projects where the person may add and change tools; None: every project, and the
    tools the site shares."""
    allowed = None
    for perm in TOOL_PERMS:
        found = access.projects_with(user, perm)
        if found is not None:
            allowed = found if allowed is None else allowed & found
    return allowed


def may_share(user) -> bool:
    """Whether the person may make (or change) a tool the site shares: with the tools
    permissions site-wide only."""
    return tool_projects_allowed(user) is None


def tool_project_choices(user, current: int | None = None):
    """The projects a tool may be put into by the person, by name (and the one it is in)."""
    allowed = tool_projects_allowed(user)
    projects = Project.objects.order_by("name")
    if allowed is None:
        return projects
    return projects.filter(Q(pk__in=allowed) | Q(pk=current)) if current else projects.filter(pk__in=allowed)


def _names(user) -> str:
    return ", ".join(p.name for p in tool_project_choices(user)) or "none"


def no_project_chosen(user) -> str:
    if not tool_project_choices(user).exists():
        return "You may add tools in no project: ask an administrator for a role in one."
    return f"Say which project the tool is for: you may add tools in {_names(user)}."


def tool_project_default(user) -> Project | None:
    """A new tool's project when none is named: the person's one project where they may add
    tools; shared by the site (None) for those with the permission site-wide; else the Default
    project if it is one of theirs; ProjectRefused otherwise."""
    allowed = tool_projects_allowed(user)
    if allowed is None:
        return None
    if len(allowed) == 1:
        found = Project.objects.filter(pk__in=allowed).first()
        if found is not None:
            return found
    default = Project.objects.filter(pk__in=allowed, slug=DEFAULT_SLUG).first()
    if default is None:
        raise ProjectRefused(no_project_chosen(user))
    return default


def tool_project_problem(user, project: Project | None, current: int | None = None, adding: bool = True) -> str:
    """Why the person may not put a tool (a new one, or one now in `current`) into `project`
    (None: shared by the site); "" when they may."""
    target = project.pk if project is not None else None
    if not adding and target == current:
        return ""  # where it is: a tool read and sent back whole
    if project is None:
        if may_share(user):
            return ""
        return ("Only an admin of every project may share a tool with the whole site: "
                f"choose one of your projects ({_names(user)}).")
    if not access.may_see(user, project.pk):
        return f"No project {project.slug!r}."  # another team's: as if it did not exist
    allowed = tool_projects_allowed(user)
    if allowed is not None and project.pk not in allowed:
        return (f"You may not add tools to project {project.name}: your role there does not allow it "
                f"(you may in {_names(user)}).")
    return ""


def project_named(user, value) -> Project:
    """The project named by id or slug (in a request's body), one the person sees;
    ProjectRefused otherwise, a project they do not see answered as if it did not exist."""
    project = None
    if isinstance(value, Project):
        project = value
    elif isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SAFE_INTEGER:
        project = Project.objects.filter(pk=value).first()
    elif isinstance(value, str) and value.strip() and "\x00" not in value:
        text = value.strip()
        project = Project.objects.filter(slug=text).first()
        if project is None and text.isdigit() and int(text) <= MAX_SAFE_INTEGER:
            project = Project.objects.filter(pk=int(text)).first()
    else:
        raise ProjectRefused("A project's id or slug, or null for a tool shared by the site.")
    if project is None or not access.may_see(user, project.pk):
        raise ProjectRefused(f"No project {value!r}.")
    return project


def tool_save_in_project(*, tool: Tool | None, data: dict, project) -> Tool:
    """toolsapp.services.tool_save, and the tool's project (checked by the caller): a new tool is
    made in it; one that moves is moved in the same transaction. An MCP tool stays in its
    server's project."""
    tool = tool if tool is not None else Tool()
    with transaction.atomic():
        adding = tool.pk is None
        if adding:
            tool.project = project
        saved = tool_save(tool=tool, data=data)
        if not adding and not discovery_of(saved.kind) and saved.project_id != (project.pk if project else None):
            Tool.objects.filter(pk=saved.pk).update(project=project)
            saved.project = project
        decision_settings_save(tool=saved, data=data)  # checked against the tool as saved, in its project
    return saved


def add_project_field(form, user, *, current: int | None, adding: bool, locked: str = "",
                      help_text: str = "The team whose tool it is: its agents may use it.") -> None:
    """A `project` choice on `form`: the projects where `user` may put tools, and "Shared by the
    site" for those who may share; the person's default chosen for a new one. `locked`: why it
    cannot be changed (an MCP tool's project is its server's)."""
    share = may_share(user) or (not adding and current is None)
    field = forms.ModelChoiceField(
        # Not required: an empty choice is refused in words (clean_project_field), and a form sent
        # without the field keeps the tool's project.
        queryset=tool_project_choices(user, current), required=False, label="Project",
        empty_label=SHARED_LABEL if share else "Choose a project",
        help_text=help_text + (f" {SHARED_HELP}" if share else ""),
    )
    field.error_messages["invalid_choice"] = f"Choose one of the projects where you may add tools: {_names(user)}."
    if adding:
        try:
            field.initial = tool_project_default(user)
        except ProjectRefused:
            field.initial = None
    else:
        field.initial = current
    if field.initial is not None and not share:
        field.empty_label = None  # chosen for them; no empty choice to pick by mistake
    if locked:
        field.disabled = True
        field.help_text = locked
    form.fields["project"] = field
    form.order_fields(["name", "project"])
    form.project_adding = adding


def clean_project_field(form, user, current: int | None):
    """The form's chosen project (see add_project_field); a form sent without the field keeps the
    tool's project (a new one gets the person's default)."""
    if form.fields["project"].disabled:
        return form.cleaned_data.get("project")  # its initial value: where the tool is
    if form.add_prefix("project") not in form.data:
        if not form.project_adding:
            return Project.objects.filter(pk=current).first() if current else None
        try:
            return tool_project_default(user)
        except ProjectRefused as exc:
            raise forms.ValidationError(str(exc)) from None
    project = form.cleaned_data.get("project")
    problem = tool_project_problem(user, project, current=current, adding=form.project_adding)
    if problem:
        raise forms.ValidationError(problem)
    return project


# --- The tool editor ------------------------------------------------------------------------------


def _config_form_field(setting: ConfigField) -> forms.Field:
    if setting.url:
        return forms.URLField(required=False, label=setting.label, assume_scheme="https", help_text=setting.help_text)
    return forms.CharField(required=False, label=setting.label, max_length=setting.max_length, help_text=setting.help_text)


# The settings every kind declares (toolsapp/executors/), as fields of the tool form.
KindSettingsForm = type("KindSettingsForm", (forms.Form,), {s.name: _config_form_field(s) for s in config_fields()})
CONFIG_NAMES = [setting.name for setting in config_fields()]


class ToolForm(forms.ModelForm, KindSettingsForm):
    parameters = forms.CharField(
        label="Parameters (JSON Schema)",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        help_text='A Draft 2020-12 JSON Schema whose root is {"type": "object", ...}; only local $ref.',
    )
    sensitive_fields = forms.CharField(
        required=False, help_text="Comma separated argument names masked in the UI."
    )
    repeat_limit = forms.IntegerField(required=False, help_text="Identical calls allowed per run; empty uses the agent's.")
    timeout_seconds = forms.FloatField()
    # The moment of decision (toolsapp/decision_settings.py checks them, for the API too).
    identifier_fields = forms.CharField(
        required=False, label="Identifier fields",
        help_text="Comma separated argument names that say which thing a call acts on (order_id): calls with "
                  "the same values are twins, shown on each other's cards. Empty: all arguments.",
    )
    state_check = forms.CharField(
        required=False, label="State check", widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text=f"A read-only tool run before a person decides, its arguments taken from the call: {EXAMPLE}. "
                  "Its answer shows on the card. Empty: none.",
    )
    requires_read = forms.CharField(
        required=False, label="Requires an earlier read", widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text=f"A call is refused (the model is told what to call first) unless this read succeeded earlier "
                  f"in the run with the same values: {EXAMPLE}. Empty: none.",
    )

    class Meta:
        model = Tool
        fields = [
            "name", "description", "parameters", "destructive", "always_ask", "critical", "allow_argument_edits",
            "parallel_safe", "idempotent", "in_experiments",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler", *CONFIG_NAMES, "enabled",
            "identifier_fields", "state_check", "requires_read", "reads_outside_content",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"kind": " ".join(discovery_of(kind).added for kind, _ in kind_choices() if discovery_of(kind))}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        # The stored tool, before this form changes its instance: the rules compare with it.
        self.stored = self.instance if self.instance.pk else None
        # The dashboard says who saves: it then offers the projects they may put the tool in
        # (the admin, for superusers, keeps a tool's project as it is).
        self.user = user
        if user is not None:
            discovered = discovery_of(self.stored.kind) if self.stored is not None else None
            add_project_field(self, user, current=self.stored.project_id if self.stored else None,
                              adding=self.stored is None, locked=discovered.project if discovered else "")
        if not self.is_bound:
            self.initial["parameters"] = json.dumps(
                self.initial.get("parameters") or {"type": "object", "properties": {}, "required": [],
                                                    "additionalProperties": False},
                indent=2, ensure_ascii=False,
            )
            self.initial["sensitive_fields"] = ", ".join(self.initial.get("sensitive_fields") or [])
            self.initial["identifier_fields"] = ", ".join(self.initial.get("identifier_fields") or [])
            for name in ("state_check", "requires_read"):
                value = self.initial.get(name)
                self.initial[name] = json.dumps(value, ensure_ascii=False) if value else ""
            for name, value in config_typed(self.instance).items():
                self.initial.setdefault(name, value)
        if self.instance.pk and discovery_of(self.instance.kind):
            # Where a discovered tool lives and what it is called there come from discovery.
            for name in ("kind", "name", "handler", *CONFIG_NAMES):
                self.fields[name].disabled = True
        else:
            self.fields["kind"].choices = [c for c in kind_choices() if not discovery_of(c[0])]
        # A form sent without it (a script, an older page) keeps what the tool has.
        self.fields["in_experiments"].required = False

    def clean_in_experiments(self):
        return self.cleaned_data["in_experiments"] or (self.stored.in_experiments if self.stored else "auto")

    def clean_parameters(self):
        text = self.cleaned_data["parameters"]
        try:
            return bounded_loads(text)
        except JsonTooDeep as exc:
            raise forms.ValidationError(f"Not accepted: {exc}.") from None
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None

    def clean_project(self):
        return clean_project_field(self, self.user, self.stored.project_id if self.stored else None)

    def clean_sensitive_fields(self):
        return [part.strip() for part in self.cleaned_data["sensitive_fields"].split(",") if part.strip()]

    def clean_identifier_fields(self):
        return [part.strip() for part in self.cleaned_data["identifier_fields"].split(",") if part.strip()]

    def _kept(self, name: str) -> bool:
        """A form sent without the field (a script, an older page) keeps what the tool has."""
        return self.is_bound and self.stored is not None and self.add_prefix(name) not in self.data

    def clean_state_check(self):
        return self._link("state_check")

    def clean_requires_read(self):
        return self._link("requires_read")

    def _link(self, name: str) -> dict:
        """A state check's or a required read's JSON text as an object ({} when empty)."""
        text = self.cleaned_data[name].strip()
        if not text:
            return {}
        try:
            value = bounded_loads(text)
        except (JsonTooDeep, json.JSONDecodeError) as exc:
            raise forms.ValidationError(f"Not valid JSON ({exc}); write it as {EXAMPLE}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError(f"An object such as {EXAMPLE}, or empty for none.")
        return value

    def clean(self):
        data = super().clean()
        for name in ("identifier_fields", "state_check", "requires_read"):
            if self._kept(name):
                data.pop(name, None)
        try:
            tool_validate(tool=self.stored, data=data)
        except ToolInvalid as exc:
            self.add_tool_errors(exc)
        self.add_tool_errors(ToolInvalid(self._decision_problems(data)))
        return data

    def _decision_problems(self, data: dict) -> dict:
        """The state check, required read and identifiers, against the schema and project typed here."""
        stored = self.stored
        parameters = data.get("parameters", stored.parameters if stored else None)
        name = data.get("name") or (stored.name if stored else "")
        project = data.get("project") if "project" in self.fields else (stored.project if stored else None)
        return decision_settings_problems(
            values={field: data[field] for field in ("identifier_fields", "state_check", "requires_read") if field in data},
            parameters=parameters, tool_name=(name or "").strip(), project_id=project.pk if project else None,
        )

    def add_tool_errors(self, exc: ToolInvalid) -> None:
        """The service's errors on their fields; a field that already has an error (it could not
        even be read) keeps just that one."""
        for field, messages in exc.errors.items():
            if field in self.errors:
                continue
            for message in messages:
                self.add_error(field if field in self.fields else None, message)

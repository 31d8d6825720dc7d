"""Tools in the API: types and documentation; toolsapp.services owns the rules and the write,
toolsapp.forms which project a tool may go into."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apikit.fields import choice
from apikit.strict import KnownFieldsOnly
from toolsapp.decision_settings import EXAMPLE, decision_settings_problems
from toolsapp.executors import ConfigField, config_fields, config_typed, discovery_of, kind_choices
from toolsapp.forms import (
    ProjectRefused,
    project_named,
    tool_project_default,
    tool_project_problem,
    tool_save_in_project,
)
from toolsapp.models import Tool
from toolsapp.schemas import strict_mode_warnings
from toolsapp.services import MAX_SENSITIVE_FIELD_CHARS, MAX_TIMEOUT_SECONDS, ToolInvalid, tool_validate


def _user(field):
    """The caller (a serializer or field's context has the request)."""
    return getattr(field.context.get("request"), "user", None)


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "integer"}], "nullable": True,
                      "description": "The project's slug (its id is taken too); null: shared by the site. Answered as its slug."})
class ToolProjectField(serializers.Field):
    """A project the caller sees, by id or slug (whether they may put the tool there: validate)."""

    def to_internal_value(self, data):
        user = _user(self)
        if user is None:
            raise serializers.ValidationError("No project.")
        try:
            return project_named(user, data)
        except ProjectRefused as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value):
        return value.slug  # as the agents', rules' and budgets' project


def _config_field(setting: ConfigField) -> tuple[type[serializers.Field], dict]:
    """A setting a kind declares (toolsapp/executors/), as a field of the API's tools."""
    field_class = serializers.URLField if setting.url else serializers.CharField
    return field_class, {"required": False, "allow_blank": True, "max_length": setting.max_length,
                         "help_text": setting.api_help_text}


class ToolSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    """Types and documentation of a tool's fields; toolsapp.services owns the rules and the write."""

    parameters = serializers.DictField(help_text='Draft 2020-12 JSON Schema with root {"type": "object"}; only local $ref.')
    sensitive_fields = serializers.ListField(
        child=serializers.CharField(max_length=MAX_SENSITIVE_FIELD_CHARS), required=False,
        help_text="Argument names masked in the UI.",
    )
    kind = choice(kind_choices(), "ToolKind", required=False)
    identifier_fields = serializers.ListField(
        child=serializers.CharField(max_length=MAX_SENSITIVE_FIELD_CHARS), required=False,
        help_text="Argument names that say which thing a call acts on: calls with the same values are twins. "
                  "Empty: all arguments.",
    )
    state_check = serializers.JSONField(required=False, help_text=(
        f"A read-only tool run before a person decides, its arguments taken from the call by JSON paths: {EXAMPLE}. "
        "{} for none. The named tool must not be destructive, and must be this tool's project's or shared."))
    requires_read = serializers.JSONField(required=False, help_text=(
        f"A read that must have succeeded earlier in the run with the same values, else a call is refused as data: "
        f"{EXAMPLE}. {{}} for none."))
    project = ToolProjectField(required=False, allow_null=True, help_text=(
        "The team whose tool it is (its agents may use it); null: shared by the site, for every project's agents, "
        "which only admins of every project may choose. Omitted on a new tool: the caller's one project where they "
        "may add tools, else shared by the site if they may, else the Default project. An MCP tool is in its "
        "server's project."))
    project_name = serializers.SerializerMethodField(help_text="The project's name; null: shared by the site.")
    mcp_server = serializers.SerializerMethodField(help_text="MCP tools: the server they were discovered on.")
    schema_warnings = serializers.SerializerMethodField(help_text="OpenAI strict mode warnings (the tool still works).")

    class Meta:
        model = Tool
        fields = [
            "id", "name", "project", "project_name", "description", "parameters", "destructive", "always_ask", "critical", "allow_argument_edits",
            "parallel_safe", "idempotent", "in_experiments",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler",
            *(setting.name for setting in config_fields()),  # the kinds' settings (toolsapp/executors/)
            "mcp_server", "enabled", "identifier_fields", "state_check", "requires_read", "reads_outside_content",
            "schema_warnings", "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {
            "name": {"validators": []},  # the service checks that it is free, once it is known to be storable
            "timeout_seconds": {"max_value": MAX_TIMEOUT_SECONDS},
            "repeat_limit": {"min_value": 1},
        }

    def build_field(self, field_name, info, model_class, nested_depth):
        # The settings the kinds declare: stored in the tool's config, given and shown by name.
        setting = next((s for s in config_fields() if s.name == field_name), None)
        if setting is not None:
            return _config_field(setting)
        return super().build_field(field_name, info, model_class, nested_depth)

    def to_representation(self, tool):
        data = super().to_representation(tool)
        data.update(config_typed(tool))
        return data

    def get_project_name(self, tool) -> str | None:
        return tool.project.name if tool.project_id else None

    def get_mcp_server(self, tool) -> str | None:
        # None for an MCP tool whose server was deleted (the tool is disabled then).
        return tool.mcp_server.name if tool.mcp_server else None

    def get_schema_warnings(self, tool) -> list[str]:
        return strict_mode_warnings(tool.parameters) if isinstance(tool.parameters, dict) else []

    def validate(self, attrs):
        errors = {}
        problem = self._project_problem(attrs)
        if problem:
            errors["project"] = [problem]
        try:
            tool_validate(tool=self.instance, data=attrs)
        except ToolInvalid as exc:
            errors.update(exc.errors)
        for field, problems in self._decision_problems(attrs).items():
            errors.setdefault(field, problems)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs

    def _decision_problems(self, attrs) -> dict:
        """The state check, required read and identifiers, against the schema and project sent (or the tool's)."""
        tool = self.instance
        project = attrs["project"] if "project" in attrs else (tool.project if tool is not None else None)
        name = attrs.get("name", tool.name if tool is not None else "")
        return decision_settings_problems(
            values={field: attrs[field] for field in ("identifier_fields", "state_check", "requires_read") if field in attrs},
            parameters=attrs.get("parameters", tool.parameters if tool is not None else None),
            tool_name=name.strip() if isinstance(name, str) else "", project_id=project.pk if project else None,
        )

    def _project_problem(self, attrs) -> str:
        """Why the caller may not put the tool where `attrs` says (a new one with no project named
        goes to their default, set here)."""
        user, tool = _user(self), self.instance
        if "project" not in attrs:
            if tool is not None:
                return ""  # where it is
            try:
                attrs["project"] = tool_project_default(user)
            except ProjectRefused as exc:
                return str(exc)
            return ""
        current = tool.project_id if tool is not None else None
        target = attrs["project"].pk if attrs["project"] is not None else None
        discovered = discovery_of(tool.kind) if tool is not None else None
        if discovered and target != current:
            return discovered.project
        return tool_project_problem(user, attrs["project"], current=current, adding=tool is None)

    def create(self, validated_data):
        return self._save(None, validated_data)

    def update(self, instance, validated_data):
        return self._save(instance, validated_data)

    def _save(self, tool, data) -> Tool:
        project = data.pop("project") if "project" in data else (tool.project if tool is not None else None)
        try:
            return tool_save_in_project(tool=tool, data=data, project=project)
        except ToolInvalid as exc:  # changed by someone else since validate()
            raise serializers.ValidationError(exc.errors) from None

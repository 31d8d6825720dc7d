"""Tools in the API: types and documentation; toolsapp.services owns the rules and the write."""
from rest_framework import serializers

from runs.web.api.serializers.fields import choice
from runs.web.api.strict import KnownFieldsOnly
from toolsapp.models import Tool
from toolsapp.schemas import strict_mode_warnings
from toolsapp.services import MAX_SENSITIVE_FIELD_CHARS, MAX_TIMEOUT_SECONDS, ToolInvalid, tool_save, tool_validate


class ToolSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    """Types and documentation of a tool's fields; toolsapp.services owns the rules and the write."""

    parameters = serializers.DictField(help_text='Draft 2020-12 JSON Schema with root {"type": "object"}; only local $ref.')
    sensitive_fields = serializers.ListField(
        child=serializers.CharField(max_length=MAX_SENSITIVE_FIELD_CHARS), required=False,
        help_text="Argument names masked in the UI.",
    )
    kind = choice(Tool.Kind.choices, "ToolKind", required=False)
    url = serializers.URLField(
        required=False, allow_blank=True, max_length=2000,
        help_text="HTTP tools: where the worker POSTs the arguments (private addresses need OUTBOUND_ALLOWLIST).",
    )
    secret_env = serializers.CharField(
        required=False, allow_blank=True, max_length=100,
        help_text="HTTP tools: environment variable (TOOL_SECRET_...) whose value is sent as a Bearer token.",
    )
    mcp_server = serializers.SerializerMethodField(help_text="MCP tools: the server they were discovered on.")
    schema_warnings = serializers.SerializerMethodField(help_text="OpenAI strict mode warnings (the tool still works).")

    class Meta:
        model = Tool
        fields = [
            "id", "name", "description", "parameters", "destructive", "always_ask", "critical", "allow_argument_edits",
            "parallel_safe", "idempotent", "in_experiments",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler", "url", "secret_env",
            "mcp_server", "enabled", "schema_warnings", "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {
            "name": {"validators": []},  # the service checks that it is free, once it is known to be storable
            "timeout_seconds": {"max_value": MAX_TIMEOUT_SECONDS},
            "repeat_limit": {"min_value": 1},
        }

    def to_representation(self, tool):
        data = super().to_representation(tool)
        config = tool.config or {}
        data["url"] = config.get("url", "") if tool.kind == Tool.Kind.HTTP else ""
        data["secret_env"] = config.get("secret_env", "") if tool.kind == Tool.Kind.HTTP else ""
        return data

    def get_mcp_server(self, tool) -> str | None:
        # None for an MCP tool whose server was deleted (the tool is disabled then).
        return tool.mcp_server.name if tool.kind == Tool.Kind.MCP and tool.mcp_server else None

    def get_schema_warnings(self, tool) -> list[str]:
        return strict_mode_warnings(tool.parameters) if isinstance(tool.parameters, dict) else []

    def validate(self, attrs):
        try:
            tool_validate(tool=self.instance, data=attrs)
        except ToolInvalid as exc:
            raise serializers.ValidationError(exc.errors) from None
        return attrs

    def create(self, validated_data):
        return self._save(None, validated_data)

    def update(self, instance, validated_data):
        return self._save(instance, validated_data)

    def _save(self, tool, data) -> Tool:
        try:
            return tool_save(tool=tool, data=data)
        except ToolInvalid as exc:  # changed by someone else since validate()
            raise serializers.ValidationError(exc.errors) from None

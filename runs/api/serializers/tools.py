"""Tools in the API."""
from rest_framework import serializers

from runs.api.serializers.fields import StorableUniqueValidator, choice
from runs.text import check_storable_json
from toolsapp.forms import TOOL_NAME
from toolsapp.http_tools import http_tool_config
from toolsapp.models import Tool
from toolsapp.schemas import InvalidSchema, check_tool_schema, strict_mode_warnings


class ToolSerializer(serializers.ModelSerializer):
    parameters = serializers.DictField(help_text='Draft 2020-12 JSON Schema with root {"type": "object"}; only local $ref.')
    sensitive_fields = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, help_text="Argument names masked in the UI."
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
            "id", "name", "description", "parameters", "destructive", "parallel_safe", "idempotent",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler", "url", "secret_env",
            "mcp_server", "enabled", "schema_warnings", "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {
            "name": {"validators": [StorableUniqueValidator(queryset=Tool.objects.all())]},
            "timeout_seconds": {"max_value": 24 * 3600},
            "repeat_limit": {"min_value": 1},
        }

    def to_representation(self, tool):
        data = super().to_representation(tool)
        config = tool.config or {}
        data["url"] = config.get("url", "") if tool.kind == Tool.Kind.HTTP else ""
        data["secret_env"] = config.get("secret_env", "") if tool.kind == Tool.Kind.HTTP else ""
        return data

    def get_mcp_server(self, tool) -> str | None:
        if tool.kind != Tool.Kind.MCP:
            return None
        from toolsapp.models import McpServer

        server = McpServer.objects.filter(pk=(tool.config or {}).get("server")).first()
        return server.name if server else None

    def validate(self, attrs):
        attrs = super().validate(attrs)
        instance = self.instance
        url = attrs.pop("url", None)
        secret_env = attrs.pop("secret_env", None)
        was = instance.kind if instance else None
        kind = attrs.get("kind", was or Tool.Kind.PYTHON)
        if (kind == Tool.Kind.MCP) != (was == Tool.Kind.MCP):
            raise serializers.ValidationError({"kind": "MCP tools are added by discovering an MCP server's tools."})
        if was == Tool.Kind.MCP and "name" in attrs and attrs["name"] != instance.name:
            raise serializers.ValidationError({"name": "An MCP tool keeps the name discovery gave it."})
        if kind == Tool.Kind.HTTP:
            old = (instance.config or {}) if instance and was == Tool.Kind.HTTP else {}
            config, problems = http_tool_config(
                url=old.get("url", "") if url is None else url,
                secret_env=old.get("secret_env", "") if secret_env is None else secret_env,
            )
            if problems:
                raise serializers.ValidationError(problems)
            attrs["config"] = config
        elif kind == Tool.Kind.PYTHON and was == Tool.Kind.HTTP:
            attrs["config"] = {}
        return attrs

    def get_schema_warnings(self, tool) -> list[str]:
        return strict_mode_warnings(tool.parameters) if isinstance(tool.parameters, dict) else []

    def validate_name(self, value):
        if not TOOL_NAME.match(value):
            raise serializers.ValidationError("Use 1-64 letters, digits, underscores or hyphens (the API's rule).")
        return value

    def validate_parameters(self, value):
        check_storable_json(value, "parameters")
        try:
            check_tool_schema(value)
        except InvalidSchema as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

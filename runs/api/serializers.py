"""Request and response shapes of the API.

Input serializers check types and text; the rules themselves stay where the dashboard keeps
them (the launch form, run_config, the limit guards, check_tool_schema). Output serializers
describe the plain dicts of runs.snapshots, shared with the CLI's JSON, for the schema.
"""
from django.core.validators import URLValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import UniqueValidator

from runs.models import Agent, Approval, Run, ToolCall, ToolChoice
from runs.services.guards import MAX_SAFE_INTEGER, InvalidLimit, check_positive_int, check_positive_number
from toolsapp.models import Tool
from toolsapp.schemas import strict_mode_warnings
from toolsapp.services import MAX_SENSITIVE_FIELD_CHARS, MAX_TIMEOUT_SECONDS, ToolInvalid, tool_save, tool_validate
from toolsapp.text import storable_json, storable_text
from toolsapp.verifiers import VERIFIERS

# --- Text the database cannot store ----------------------------------------------------------------

# storable_text and storable_json live in toolsapp.text (the tool service needs them too).


def check_storable_json(value, where: str = "value"):
    """Raise a ValidationError when a string anywhere in `value` (keys too) cannot be stored."""
    if not storable_json(value):
        raise serializers.ValidationError(f"{where} contains a NUL or an unpaired surrogate character.")
    return value


class StorableUniqueValidator(UniqueValidator):
    # DRF runs every validator of a field even after one failed: without this, text with a NUL
    # would reach the uniqueness query (and PostgreSQL) next to the "Null characters" error.
    def __call__(self, value, serializer_field):
        if isinstance(value, str) and not storable_text(value):
            return
        super().__call__(value, serializer_field)


class NameRelatedField(serializers.SlugRelatedField):
    """An object given by its unique name; text that cannot be stored is never looked up."""

    def to_internal_value(self, data):
        if isinstance(data, str) and not storable_text(data):
            self.fail("does_not_exist", slug_name=self.slug_field, value="(unstorable text)")
        return super().to_internal_value(data)


_CHOICE_FIELDS: dict[str, type[serializers.ChoiceField]] = {}


def choice(choices, component: str, **kwargs) -> serializers.ChoiceField:
    """A ChoiceField whose enum is the named schema component: the same choices under several
    field names (first and later tool choice), or several choice sets under one field name
    (status of runs, calls and approvals), would otherwise leave drf-spectacular guessing names."""
    if component not in _CHOICE_FIELDS:
        values = [value for value, _ in choices]
        schema = {"type": "string", "enum": values}
        if kwargs.get("allow_null"):
            schema = {"type": "string", "enum": [*values, None], "nullable": True}

        # One class per component (the schema's identity of it); a class, not an annotated
        # instance, because serializers deep-copy their fields, which rebuilds them.
        @extend_schema_field(schema, component_name=component)
        class NamedChoiceField(serializers.ChoiceField):
            pass

        _CHOICE_FIELDS[component] = NamedChoiceField
    return _CHOICE_FIELDS[component](choices=choices, **kwargs)


def _limit(check, name: str, value):
    try:
        return check(name, value)
    except InvalidLimit as exc:
        raise serializers.ValidationError(str(exc)) from None


# --- Runs -------------------------------------------------------------------------------------------


class RunCreateSerializer(serializers.Serializer):
    """A launch, as on the dashboard's launch form: omitted settings are the agent's."""

    agent = NameRelatedField(slug_field="name", queryset=Agent.objects.all(), help_text="The agent's name.")
    task = serializers.CharField(max_length=20_000)
    customer = serializers.CharField(required=False, allow_blank=True, max_length=100,
                                     help_text="Whose data the tools may touch; empty uses the default.")
    models = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, allow_empty=True,
        help_text="Models tried in this order; empty or omitted uses the agent's.",
    )
    tools = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, allow_empty=True,
        help_text="Enabled tools this run may call; empty or omitted uses the agent's.",
    )
    max_iterations = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    repeat_limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    max_wall_seconds = serializers.FloatField(required=False)
    max_tokens = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    max_cost_usd = serializers.FloatField(required=False)
    first_tool_choice = choice(ToolChoice.choices, "ToolChoice", required=False)
    later_tool_choice = choice(ToolChoice.choices, "ToolChoice", required=False)

    def validate_models(self, models):
        if any("," in name for name in models):
            # The launch form reads models as a comma separated list, as the dashboard does.
            raise serializers.ValidationError("A model name cannot contain a comma.")
        return models

    def as_launch_form_data(self) -> dict:
        """The launch form's POST data for these values (the form owns the launch rules)."""
        data = self.validated_data
        form_data = {
            "agent": data["agent"].pk,
            "task": data["task"],
            "customer": data.get("customer", ""),
            "models": ", ".join(data.get("models") or []),
            "tools": list(data.get("tools") or []),
        }
        for name in ("max_iterations", "repeat_limit", "max_wall_seconds", "max_tokens", "max_cost_usd",
                     "first_tool_choice", "later_tool_choice"):
            form_data[name] = data.get(name, "")
        return form_data


class RunListItemSerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    agent_id = serializers.IntegerField()
    agent = serializers.CharField()
    task_preview = serializers.CharField(help_text="The task's first 120 characters.")
    status = choice(Run.Status.choices, "RunStatus")
    stop_reason = choice(Run.StopReason.choices, "StopReason", allow_null=True)
    iterations = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_usd = serializers.FloatField()


class RunPageSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Matching runs, counted up to a cap (see count_is_exact).")
    count_is_exact = serializers.BooleanField(help_text="False when more runs match than were counted.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = RunListItemSerializer(many=True)


class ApprovalBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = choice(Approval.Status.choices, "ApprovalStatus")
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    automatic = serializers.BooleanField()
    expires_at = serializers.DateTimeField(allow_null=True)


class CallSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The model's id of the call.")
    pk = serializers.IntegerField()
    index = serializers.IntegerField()
    tool = serializers.CharField()
    args_hash = serializers.CharField(help_text="HMAC-SHA256 of the canonical arguments; arguments are never shown.")
    status = choice(ToolCall.Status.choices, "CallStatus")
    ok = serializers.BooleanField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    truncated = serializers.BooleanField()
    latency_ms = serializers.FloatField(allow_null=True)
    result_preview = serializers.CharField(allow_blank=True)
    approval = ApprovalBriefSerializer(allow_null=True)


class StepSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    iteration = serializers.IntegerField()
    kind = serializers.CharField()
    model = serializers.CharField()
    finish_reason = serializers.CharField(allow_blank=True)
    latency_ms = serializers.FloatField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_usd = serializers.FloatField()
    tool_choice = serializers.CharField(allow_blank=True)
    tool_choice_fallback = serializers.BooleanField()
    model_errors = serializers.JSONField()
    content = serializers.JSONField(help_text="What the model said (text, or content parts).")
    calls = CallSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField()


class RunSummarySerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    agent = serializers.CharField()
    task = serializers.CharField()
    status = choice(Run.Status.choices, "RunStatus")
    stop_reason = choice(Run.StopReason.choices, "StopReason", allow_null=True)
    stop_detail = serializers.CharField(allow_blank=True)
    answer = serializers.CharField(allow_blank=True)
    iterations = serializers.IntegerField()
    usage = UsageSerializer()
    wall_seconds = serializers.FloatField()
    created_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class RunDetailSerializer(RunSummarySerializer):
    agent_id = serializers.IntegerField()
    customer = serializers.CharField(allow_blank=True)
    created_by = serializers.CharField(allow_null=True)
    rerun_of = serializers.IntegerField(allow_null=True)
    cancel_requested = serializers.BooleanField()
    overrides = serializers.JSONField()
    steps = StepSerializer(many=True)


class RunActionSerializer(serializers.Serializer):
    detail = serializers.CharField()
    run = RunSummarySerializer()


# --- Approvals ------------------------------------------------------------------------------------


class PendingApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    agent = serializers.CharField()
    task = serializers.CharField()
    tool = serializers.CharField()
    call_id = serializers.CharField()
    args_hash = serializers.CharField()
    arguments = serializers.CharField(
        allow_blank=True, help_text="Pretty-printed JSON; fields the tool marks sensitive are shown as ••••."
    )
    arguments_problem = serializers.CharField(allow_blank=True)
    raw_arguments = serializers.CharField(allow_blank=True, help_text="Only for unparsable arguments of a tool that masks nothing.")
    unseen_identifiers = serializers.ListField(
        child=serializers.CharField(), help_text="Identifiers the model never saw in the task or a tool result."
    )
    model_said = serializers.CharField(allow_blank=True)
    note = serializers.CharField(allow_blank=True)
    requested_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    expired = serializers.BooleanField()


class DecisionSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class DecisionResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    approval = ApprovalBriefSerializer()


# --- Agents and tools -------------------------------------------------------------------------------


class AgentSerializer(serializers.ModelSerializer):
    model_list = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, help_text="Ordered model names; empty uses LLM_MODELS."
    )
    base_url = serializers.CharField(
        required=False, allow_blank=True, max_length=200, validators=[URLValidator(schemes=["http", "https"])],
        help_text="OpenAI-compatible endpoint (http or https); empty uses LLM_BASE_URL.",
    )
    tools = NameRelatedField(many=True, required=False, slug_field="name", queryset=Tool.objects.all())
    provider_options = serializers.DictField(required=False)
    verifier = serializers.CharField(required=False, allow_blank=True, max_length=100)
    first_tool_choice = choice(ToolChoice.choices, "ToolChoice", required=False)
    later_tool_choice = choice(ToolChoice.choices, "ToolChoice", required=False)

    class Meta:
        model = Agent
        fields = [
            "id", "name", "description", "system_prompt", "model_list", "base_url", "tools",
            "max_iterations", "repeat_limit", "max_wall_seconds", "max_tokens", "max_cost_usd", "max_output_tokens",
            "first_tool_choice", "later_tool_choice", "parallel_tool_calls", "provider_options",
            "verifier", "summarize_on_stop", "approval_timeout_seconds", "daily_token_alert", "daily_cost_alert_usd",
            "created_at", "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"name": {"validators": [StorableUniqueValidator(queryset=Agent.objects.all())]}}

    def validate_tools(self, tools):
        disabled = sorted(t.name for t in tools if not t.enabled)
        if disabled:
            # run_create refuses disabled tools, so every run of this agent would fail to start.
            raise serializers.ValidationError(f"These tools are disabled: {', '.join(disabled)}.")
        return tools

    def validate_provider_options(self, value):
        return check_storable_json(value, "provider_options")

    def validate_verifier(self, value):
        if value and value not in VERIFIERS:
            raise serializers.ValidationError(f"No verifier named {value!r}.")
        return value

    def validate_max_iterations(self, value):
        return _limit(check_positive_int, "max_iterations", value)

    def validate_repeat_limit(self, value):
        return _limit(check_positive_int, "repeat_limit", value)

    def validate_max_tokens(self, value):
        return _limit(check_positive_int, "max_tokens", value)

    def validate_max_wall_seconds(self, value):
        return _limit(check_positive_number, "max_wall_seconds", value)

    def validate_max_cost_usd(self, value):
        return _limit(check_positive_number, "max_cost_usd", value)

    def validate_max_output_tokens(self, value):
        return value if value is None else _limit(check_positive_int, "max_output_tokens", value)

    def validate_approval_timeout_seconds(self, value):
        return value if value is None else _limit(check_positive_int, "approval_timeout_seconds", value)

    def validate_daily_token_alert(self, value):
        return value if value is None else _limit(check_positive_int, "daily_token_alert", value)

    def validate_daily_cost_alert_usd(self, value):
        return value if value is None else _limit(check_positive_number, "daily_cost_alert_usd", value)


class ToolSerializer(serializers.ModelSerializer):
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
            "id", "name", "description", "parameters", "destructive", "parallel_safe", "idempotent",
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

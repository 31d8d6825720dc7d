"""Runs in the API: a launch, and the shapes of runs.engine.storage.snapshots' plain dicts (shared with the CLI's JSON)."""
from rest_framework import serializers

from apikit.fields import NameRelatedField, choice, service_errors
from apikit.strict import KnownFieldsOnly
from hosting.text import MAX_SAFE_INTEGER
from runs.engine.guards import POSITIVE_INT_LIMITS
from runs.lifecycle.launch_rules import (
    LAUNCH_CHOICES,
    LIMIT_SETTINGS,
    POLICY_LABELS,
    TOOL_CHOICE_SETTINGS,
    customer_problem,
    launch_overrides,
)
from runs.lifecycle.run_reads import agents_for_launch
from runs.lifecycle.runs import launch_errors
from runs.models import Agent, Run, ToolCall, ToolChoice
from runs.web.api.serializers.approvals import ApprovalBriefSerializer
from runs.web.api.serializers.fields import UsageSerializer
from runs.web.api.serializers.forks import RunFamilySerializer

# A run's status as clients see it: its stored one, or "stopping" while its summary is written.
RUN_STATUSES = [*Run.Status.choices, (Run.STOPPING, Run.STOPPING_LABEL)]
STATUS_LABEL_HELP = ('The status in the dashboard\'s words: "Stopped by an operator" for a run stopped with a summary '
                     '(status "cancelled"), else the status\'s label.')
CALLS_REJECTED_HELP = "Calls a person or a rule rejected (they never ran), whatever the run's status."
CALLS_EDITED_HELP = "Calls approved with arguments a person edited (they ran as edited)."


def setting_field(name: str) -> serializers.Field:
    """The API's field for one limit or tool choice of a launch; omitted, the agent's setting applies."""
    if name in TOOL_CHOICE_SETTINGS:
        return choice(ToolChoice.choices, "ToolChoice", required=False)
    if name in POSITIVE_INT_LIMITS:
        return serializers.IntegerField(required=False, min_value=1, max_value=MAX_SAFE_INTEGER)
    return serializers.FloatField(required=False)


def approval_policy_field():
    return choice(
        list(POLICY_LABELS.items()), "ApprovalPolicy", required=False,
        help_text='How destructive calls are decided; omitted: "ask" (a person decides each). "approve" needs '
                  "the permission runs.approve_all_launch (403 otherwise).",
    )


class RunRerunSerializer(KnownFieldsOnly, serializers.Serializer):
    """A re-run: the original's task, agent, overrides and customer; never its approval policy."""

    approval_policy = approval_policy_field()


class RunCreateSerializer(KnownFieldsOnly, serializers.Serializer):
    """A launch, as on the dashboard's launch form: omitted settings are the agent's. Tools must
    be the agent's and limits at most the agent's, unless the user may change agents."""

    agent = NameRelatedField(slug_field="name", queryset=Agent.objects.all(), help_text="The agent's name.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            # An agent of a project where the caller does not launch runs is not found.
            self.fields["agent"].queryset = agents_for_launch(request.user)

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
    approval_policy = approval_policy_field()
    # ...then one field per limit and tool choice (LIMIT_SETTINGS, TOOL_CHOICE_SETTINGS), in get_fields.

    def validate_customer(self, value: str) -> str:
        value = value.strip()
        problem = customer_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def get_fields(self):
        fields = super().get_fields()
        for name in LIMIT_SETTINGS + TOOL_CHOICE_SETTINGS:
            fields[name] = setting_field(name)
        return fields

    def validate(self, attrs):
        """The data, with `overrides`: the settings that differ from the agent's, for run_create."""
        chosen = {name: attrs.get(name) for name in LAUNCH_CHOICES}
        # An empty list of models or tools, like an omitted setting, keeps the agent's.
        chosen["models"], chosen["tools"] = attrs.get("models") or None, attrs.get("tools") or None
        overrides = launch_overrides(agent=attrs["agent"], chosen=chosen)
        errors = launch_errors(agent=attrs["agent"], overrides=overrides, user=self.context["request"].user)
        if errors:
            raise service_errors(errors)
        return {**attrs, "overrides": overrides}


class RunListItemSerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    agent_id = serializers.IntegerField()
    agent = serializers.CharField()
    task_preview = serializers.CharField(help_text="The task's first 120 characters.")
    status = choice(RUN_STATUSES, "RunStatus")
    status_label = serializers.CharField(help_text=STATUS_LABEL_HELP)
    stop_reason = choice(Run.StopReason.choices, "StopReason", allow_null=True)
    calls_rejected = serializers.IntegerField(help_text=CALLS_REJECTED_HELP)
    calls_edited = serializers.IntegerField(help_text=CALLS_EDITED_HELP)
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
    tokens_cached = serializers.IntegerField(required=False, help_text="Of tokens_in, read from the provider's cache.")
    tokens_reasoning = serializers.IntegerField(required=False, help_text="Of tokens_out, spent on reasoning.")
    context_tokens = serializers.IntegerField(
        required=False, help_text="The request's size, estimated before it was sent (tool definitions included).")
    tool_definition_tokens = serializers.IntegerField(required=False, help_text="Of context_tokens, estimated.")
    compacted_calls = serializers.ListField(
        child=serializers.CharField(), required=False,
        help_text="Call ids whose result this request carried as a summary (whole in the journal).")
    cost_usd = serializers.FloatField()
    tool_choice = serializers.CharField(allow_blank=True)
    tool_choice_fallback = serializers.BooleanField()
    model_errors = serializers.JSONField()
    content = serializers.JSONField(help_text="What the model said (text, or content parts).")
    reasoning = serializers.CharField(allow_blank=True, required=False,
                                      help_text="The model's reasoning, kept apart from its answer.")
    notes = serializers.ListField(child=serializers.CharField(), required=False,
                                  help_text="What reading the answer replaced (characters that cannot be stored) or left out.")
    calls = CallSerializer(many=True)


class RunSummarySerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    agent = serializers.CharField()
    task = serializers.CharField()
    status = choice(RUN_STATUSES, "RunStatus")
    stop_reason = choice(Run.StopReason.choices, "StopReason", allow_null=True)
    stop_detail = serializers.CharField(allow_blank=True)
    answer = serializers.CharField(allow_blank=True)
    iterations = serializers.IntegerField()
    usage = UsageSerializer()
    wall_seconds = serializers.FloatField()
    created_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class LeverStateSerializer(serializers.Serializer):
    pause_requested = serializers.BooleanField(help_text="Pauses at its next boundary.")
    paused_by = serializers.CharField(allow_null=True, help_text="Who asked for the pause (also once paused).")
    paused_at = serializers.DateTimeField(allow_null=True)
    stop_requested_by = serializers.CharField(allow_null=True, help_text="Who asked it to stop with a summary.")
    notes_waiting = serializers.IntegerField(help_text="Operators' notes not sent to the model yet.")


class RunDetailSerializer(RunSummarySerializer):
    status_label = serializers.CharField(help_text=STATUS_LABEL_HELP)
    calls_rejected = serializers.IntegerField(help_text=CALLS_REJECTED_HELP)
    calls_edited = serializers.IntegerField(help_text=CALLS_EDITED_HELP)
    agent_id = serializers.IntegerField()
    customer = serializers.CharField(allow_blank=True)
    created_by = serializers.CharField(allow_null=True)
    rerun_of = serializers.IntegerField(allow_null=True)
    forked_from = serializers.IntegerField(allow_null=True, help_text="The run this one was forked from.")
    forked_at_step = serializers.IntegerField(allow_null=True, help_text="The parent's step the fork started after.")
    agent_version = serializers.IntegerField(allow_null=True, help_text="The agent's version the run ran with.")
    experiment = serializers.BooleanField(
        help_text="A case of an experiment: every call that would change something was simulated.")
    family = RunFamilySerializer(help_text="Where this run came from, its forks and its re-runs.")
    cancel_requested = serializers.BooleanField()
    levers = LeverStateSerializer(help_text="Operators' pause and stop requests, and notes not sent yet.")
    overrides = serializers.JSONField()
    steps = StepSerializer(many=True)


class RunActionSerializer(serializers.Serializer):
    detail = serializers.CharField()
    run = RunSummarySerializer()

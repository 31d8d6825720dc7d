"""Forks in the API: the fork request, a run's family, and a fork compared with its parent (the
plain dicts of runs.lifecycle.relatives). What an edit may say is checked by runs.lifecycle.forks."""
from rest_framework import serializers

from apikit.fields import choice
from apikit.strict import KnownFieldsOnly
from runs.lifecycle.forks import ANSWER_CHARS, EDIT_SHAPES, MAX_STEP, MESSAGE_CHARS
from runs.models import Run, ToolCall
from runs.web.api.serializers.fields import UsageSerializer


class ToolResultEditSerializer(KnownFieldsOnly, serializers.Serializer):
    call_id = serializers.CharField(trim_whitespace=False, help_text="The model's id of a call of the fork step.")
    content = serializers.CharField(trim_whitespace=False, help_text="What the model reads as that call's result, exactly.")


class ForkEditSerializer(KnownFieldsOnly, serializers.Serializer):
    """One of: a tool result of the fork step replaced, the fork step's answer replaced (a step
    without calls only), or an operator's message sent with the fork's first request."""

    tool_result = ToolResultEditSerializer(required=False)
    answer = serializers.CharField(
        required=False, max_length=ANSWER_CHARS, help_text="The fork step's text, when it made no tool calls.",
        error_messages={"max_length": f"The edited answer is longer than {ANSWER_CHARS} characters."})
    message = serializers.CharField(
        required=False, max_length=MESSAGE_CHARS, help_text=f"An operator's note, at most {MESSAGE_CHARS} characters.",
        error_messages={"max_length": f"The message is longer than {MESSAGE_CHARS} characters."})

    def validate(self, attrs):
        if len(attrs) != 1:
            raise serializers.ValidationError(f"An edit is one of {EDIT_SHAPES}.")
        return attrs


class RunForkSerializer(KnownFieldsOnly, serializers.Serializer):
    step = serializers.IntegerField(min_value=1, max_value=MAX_STEP, help_text="The parent's step to fork after (1-based).")
    edit = ForkEditSerializer(required=False, allow_null=True)


class FamilyMemberSerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    status = choice(Run.Status.choices, "RunStatus")
    status_label = serializers.CharField()
    created_at = serializers.DateTimeField()


class FamilyParentSerializer(FamilyMemberSerializer):
    relation = serializers.ChoiceField(choices=["fork", "rerun"], help_text="How this run came from it.")
    step = serializers.IntegerField(allow_null=True, help_text="The parent's step a fork started after.")


class ForkMemberSerializer(FamilyMemberSerializer):
    step = serializers.IntegerField(help_text="The step of this run the fork started after.")


class RunFamilySerializer(serializers.Serializer):
    parent = FamilyParentSerializer(allow_null=True, help_text="The run this one was forked or re-run from.")
    forks = ForkMemberSerializer(many=True)
    reruns = FamilyMemberSerializer(many=True)


class ComparedCallSerializer(serializers.Serializer):
    tool = serializers.CharField()
    args_hash = serializers.CharField(help_text="The first 12 characters of the keyed hash of the arguments.")
    status = choice(ToolCall.Status.choices, "CallStatus")
    status_label = serializers.CharField()


class ComparedStepSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    kind = serializers.CharField()
    model = serializers.CharField()
    finish_reason = serializers.CharField(allow_blank=True)
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_usd = serializers.FloatField()
    latency_ms = serializers.FloatField()
    calls = ComparedCallSerializer(many=True)


class ComparedRunSerializer(serializers.Serializer):
    run_id = serializers.IntegerField()
    status = choice(Run.Status.choices, "RunStatus")
    status_label = serializers.CharField()
    stop_reason = choice(Run.StopReason.choices, "StopReason", allow_null=True)
    stop_reason_label = serializers.CharField(allow_null=True)
    steps_since_fork = serializers.IntegerField()
    since_fork = UsageSerializer(help_text="The steps after the fork step.")
    run_totals = UsageSerializer(help_text="The whole run (a fork counts the steps it copied).")


class ComparisonRowSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    shared = serializers.BooleanField(help_text="The fork step itself, copied (and perhaps edited).")
    parent = ComparedStepSerializer(allow_null=True)
    fork = ComparedStepSerializer(allow_null=True)


class ForkEditBriefSerializer(serializers.Serializer):
    edit = serializers.ChoiceField(choices=["tool_result", "answer", "message"])
    by = serializers.CharField()
    call_id = serializers.CharField(required=False)


class RunComparisonSerializer(serializers.Serializer):
    fork_step = serializers.IntegerField()
    edit = ForkEditBriefSerializer(allow_null=True)
    parent = ComparedRunSerializer()
    fork = ComparedRunSerializer()
    rows = ComparisonRowSerializer(many=True, help_text="Per step index from the fork step on, each side's step or null.")

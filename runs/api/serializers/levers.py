"""Operators' levers in the API: a note's text in, the run and its levers' state out."""
from rest_framework import serializers

from runs.api.serializers.runs import RunSummarySerializer
from runs.services.levers import MESSAGE_MAX_CHARS
from runs.text import storable_text


class RunMessageSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=MESSAGE_MAX_CHARS, help_text="Sent to the agent as a user message.")

    def validate_text(self, value):
        if not storable_text(value):
            raise serializers.ValidationError("The text contains a NUL or an unpaired surrogate character.")
        return value


class LeverStateSerializer(serializers.Serializer):
    pause_requested = serializers.BooleanField(help_text="Pauses at its next boundary.")
    paused_by = serializers.CharField(allow_null=True, help_text="Who asked for the pause (also once paused).")
    paused_at = serializers.DateTimeField(allow_null=True)
    stop_requested_by = serializers.CharField(allow_null=True, help_text="Who asked it to stop with a summary.")
    notes_waiting = serializers.IntegerField(help_text="Operators' notes not sent to the model yet.")


class OperatorMessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    author = serializers.CharField()
    created_at = serializers.DateTimeField()
    step = serializers.IntegerField(allow_null=True, help_text="The step whose request carried it; null while it waits.")


class LeverResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    run = RunSummarySerializer()
    levers = LeverStateSerializer()
    message = OperatorMessageSerializer(required=False, help_text="The note (message lever only).")

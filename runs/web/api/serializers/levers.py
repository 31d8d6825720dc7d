"""Operators' levers in the API: a note's text in, the run and its levers' state out."""
from rest_framework import serializers

from apikit.strict import KnownFieldsOnly
from runs.controls.levers import MESSAGE_MAX_CHARS
from runs.engine.storage.text import storable_text
from runs.web.api.serializers.runs import LeverStateSerializer, RunSummarySerializer


class RunMessageSerializer(KnownFieldsOnly, serializers.Serializer):
    text = serializers.CharField(max_length=MESSAGE_MAX_CHARS, help_text="Sent to the agent as a user message.")

    def validate_text(self, value):
        if not storable_text(value):
            raise serializers.ValidationError("The text contains a NUL or an unpaired surrogate character.")
        return value


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

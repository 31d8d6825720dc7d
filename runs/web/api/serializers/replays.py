"""A step's request replayed against other models: the request body and the answers."""
from rest_framework import serializers

from apikit.strict import KnownFieldsOnly
from runs.lifecycle.replay import MAX_MODELS


class StepReplayRequestSerializer(KnownFieldsOnly, serializers.Serializer):
    models = serializers.ListField(
        child=serializers.CharField(max_length=200), min_length=1, max_length=MAX_MODELS,
        help_text=f"Up to {MAX_MODELS} model names, asked at the run's endpoint, each sent the step's request.",
        error_messages={"min_length": "Name at least one model.", "max_length": f"At most {MAX_MODELS} models at once."},
    )


class ReplayCallSerializer(serializers.Serializer):
    name = serializers.CharField()
    arguments = serializers.CharField(help_text="As the model wrote them, sensitive fields masked. Never run.")


class ReplayAnswerSerializer(serializers.Serializer):
    model = serializers.CharField()
    ok = serializers.BooleanField(help_text="False: the model failed; `error` says how.")
    content = serializers.CharField(allow_blank=True)
    tool_calls = ReplayCallSerializer(many=True, help_text="Calls the model asked for (none is run).")
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost_usd = serializers.FloatField()
    latency_ms = serializers.FloatField()
    error = serializers.CharField(allow_blank=True)


class StepReplaySerializer(serializers.Serializer):
    replay_id = serializers.IntegerField(source="record.pk")
    run_id = serializers.IntegerField(source="record.run_id")
    step = serializers.IntegerField(source="record.step_index")
    tokens_in = serializers.IntegerField(source="record.tokens_in", help_text="Of every model, counted by the budgets.")
    tokens_out = serializers.IntegerField(source="record.tokens_out")
    cost_usd = serializers.FloatField(source="record.cost_usd")
    answers = ReplayAnswerSerializer(many=True, help_text="In the order of the models asked.")

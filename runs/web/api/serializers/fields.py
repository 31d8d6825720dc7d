"""Token and cost totals, in the shapes of the API's answers: a run's usage, and a fork compared
with its parent. The fields every resource shares are apikit/fields.py's."""
from rest_framework import serializers


class UsageSerializer(serializers.Serializer):
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    tokens_cached = serializers.IntegerField(required=False, help_text="Of tokens_in, read from the provider's cache.")
    tokens_reasoning = serializers.IntegerField(required=False, help_text="Of tokens_out, spent on reasoning.")
    compactions = serializers.IntegerField(
        required=False, help_text="Requests that summarised older tool results to fit the context budget.")
    cost_usd = serializers.FloatField()

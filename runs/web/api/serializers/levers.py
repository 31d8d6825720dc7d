"""Operators' levers in the API: a lever's field in (the note's text), the run and its levers' state out."""
from rest_framework import serializers

from apikit.strict import KnownFieldsOnly
from runs.controls.lever_declaration import Lever
from runs.engine.storage.text import storable_text
from runs.web.api.serializers.runs import LeverStateSerializer, RunSummarySerializer


def lever_body_serializer(lever: Lever) -> type[serializers.Serializer]:
    """The request body of a lever that takes a field (the message lever's RunMessageSerializer)."""
    body = lever.body

    def validate_field(self, value):
        if not storable_text(value):
            raise serializers.ValidationError(f"The {body.field} contains a NUL or an unpaired surrogate character.")
        return value

    name = "Run" + "".join(part.title() for part in lever.name.split("_")) + "Serializer"
    return type(name, (KnownFieldsOnly, serializers.Serializer), {
        "__module__": __name__,
        body.field: serializers.CharField(max_length=body.max_chars, help_text=body.help),
        f"validate_{body.field}": validate_field,
    })


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

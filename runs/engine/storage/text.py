"""Text the database cannot store (NUL characters and unpaired surrogates), and JSON nested
too deeply to handle.

PostgreSQL refuses both characters, in text and in jsonb. The dashboard's forms, the API and the
services check input with these before it reaches a query.
"""
from django.core.exceptions import ValidationError

from hosting.text import MAX_JSON_DEPTH, nested_deeper_than, storable_json, storable_text

__all__ = ["check_storable_json", "storable_text"]


def check_storable_json(value, where: str = "value"):
    """Raise a ValidationError when a string anywhere in `value` (keys too) cannot be stored,
    or when `value` nests deeper than MAX_JSON_DEPTH levels.

    Django's ValidationError: forms and DRF serializers (in validate_<field>) both report it on the field.
    """
    if nested_deeper_than(value):
        raise ValidationError(f"{where} is nested deeper than {MAX_JSON_DEPTH} levels.")
    if not storable_json(value):
        raise ValidationError(f"{where} contains a NUL or an unpaired surrogate character.")
    return value

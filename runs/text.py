"""Text the database cannot store: NUL characters and unpaired surrogates.

PostgreSQL refuses both, in text and in jsonb. The dashboard's forms, the API and the services
check input with these before it reaches a query.
"""
import re

from django.core.exceptions import ValidationError

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> bool:
    """False for NUL and lone surrogates: PostgreSQL refuses both (in text and in jsonb)."""
    return "\x00" not in text and not _SURROGATE.search(text)


def check_storable_json(value, where: str = "value"):
    """Raise a ValidationError when a string anywhere in `value` (keys too) cannot be stored.

    Django's ValidationError: forms and DRF serializers (in validate_<field>) both report it on the field.
    """
    if isinstance(value, str):
        if not storable_text(value):
            raise ValidationError(f"{where} contains a NUL or an unpaired surrogate character.")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable_json(key, where)
            check_storable_json(item, where)
    elif isinstance(value, list):
        for item in value:
            check_storable_json(item, where)
    return value

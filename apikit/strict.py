"""A write names only fields its endpoint takes: any other field is a 400 that names it, so a
misspelt or unsupported setting ("critcal": true) is never silently dropped.

One mechanism for every write endpoint: input serializers mix in `KnownFieldsOnly` (it checks
each nested object too, since DRF validates nested serializers through the same method), and views
that take no body at all set `takes_no_body` (ApiMixin checks it). A field the endpoint returns
(read-only, such as `id` or `created_at`) is known: a resource read and sent back whole is taken.
"""
from collections.abc import Mapping

from rest_framework.exceptions import ValidationError

UNKNOWN_FIELD = "Unknown field: this endpoint does not take it (see /api/schema/)."
# Not a field but the CSRF token a browser form sends along with a session's write.
NOT_FIELDS = frozenset({"csrfmiddlewaretoken"})


def unknown_fields_error(data, known) -> ValidationError | None:
    """A 400 naming each key of `data` that is not in `known`; None when there is none."""
    if not isinstance(data, Mapping):
        return None  # not an object: the serializer says what it expected
    unknown = sorted(str(key) for key in data if key not in known and key not in NOT_FIELDS)
    if not unknown:
        return None
    return ValidationError({name: [UNKNOWN_FIELD] for name in unknown})


class KnownFieldsOnly:
    """Serializer mixin: refuse fields the serializer does not declare (see the module)."""

    def to_internal_value(self, data):
        error = unknown_fields_error(data, self.fields)
        if error is not None:
            raise error
        return super().to_internal_value(data)

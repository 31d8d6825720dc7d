"""Every API error is JSON with a "detail" sentence, whatever raised it: the refusals the views
raise, and DRF's answer with the sentence added. The site's exception handler
(runs/web/api/errors.py, named in the settings) answers what is the site's first."""
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "This conflicts with the current state of the resource."
    default_code = "conflict"


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


def size_in_words(size: int) -> str:
    """10485760 -> "10 MB", 2621440 -> "2.5 MB", 1000 -> "1,000 bytes"."""
    if size >= 1024 * 1024:
        return f"{round(size / (1024 * 1024), 1):g} MB"
    return f"{size:,} bytes"


def first_message(errors) -> str:
    """ "task: This field is required." from DRF's {"task": ["This field is required."]}."""
    if isinstance(errors, dict):
        for key, value in errors.items():
            inner = first_message(value)
            if key in ("non_field_errors", "__all__"):
                return inner
            return f"{key}: {inner}"
    if isinstance(errors, list) and errors:
        return first_message(errors[0])
    return str(errors) if errors else "Invalid input."


def answer_with_detail(exc, context):
    """DRF's answer to `exc`, with a "detail" sentence always; None for an exception DRF does not
    answer (a bug: Django's 500 page, and the test suite's fuzzing looks for these)."""
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if not (isinstance(data, dict) and "detail" in data):
        # Validation errors name fields instead: keep them, and add the sentence.
        response.data = {"detail": first_message(data), "errors": data}
    return response

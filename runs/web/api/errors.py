"""Every API error is JSON with a "detail" sentence, whatever raised it."""
from rest_framework import status
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from runs.engine.storage.db import connection_lost, drop_connection
from runs.web.middleware import database_unavailable
from runs.web.request_limits import limit_refusal


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "This conflicts with the current state of the resource."
    default_code = "conflict"


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


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


def exception_handler(exc, context):
    if connection_lost(exc):  # transient: the client tries again (the next request gets a new connection)
        drop_connection()
        return database_unavailable(api=True)
    refused = limit_refusal(exc)  # a body over DATA_UPLOAD_MAX_MEMORY_SIZE (Django's own errors)
    if refused is not None:
        status_code, sentence = refused
        return Response({"detail": sentence}, status=status_code)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: Django's 500 page, and the test suite's fuzzing looks for these
    data = response.data
    if not (isinstance(data, dict) and "detail" in data):
        # Validation errors name fields instead: keep them, and add the sentence.
        response.data = {"detail": first_message(data), "errors": data}
    return response

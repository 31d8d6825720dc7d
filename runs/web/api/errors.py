"""The site's API exception handler (REST_FRAMEWORK's EXCEPTION_HANDLER): what is the site's own
first, a lost database connection and a request over Django's limits, then every other error as
JSON with a "detail" sentence (apikit/errors.py)."""
from rest_framework.response import Response

from apikit.errors import answer_with_detail
from runs.engine.storage.db import connection_lost, drop_connection
from runs.web.middleware import database_unavailable
from runs.web.request_limits import limit_refusal


def exception_handler(exc, context):
    if connection_lost(exc):  # transient: the client tries again (the next request gets a new connection)
        drop_connection()
        return database_unavailable(api=True)
    refused = limit_refusal(exc)  # a body over DATA_UPLOAD_MAX_MEMORY_SIZE (Django's own errors)
    if refused is not None:
        status_code, sentence = refused
        return Response({"detail": sentence}, status=status_code)
    return answer_with_detail(exc, context)

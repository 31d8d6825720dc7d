"""A page or API call whose database connection was lost answers 503 with Retry-After, not 500.

The pool replaces a connection that died while idle before it is handed out (settings.py); this
covers the one that dies during the request (a restart, a failover): the request cannot be
finished, the next one gets a new connection, so the client is told to try again shortly.
"""
from django.http import HttpResponse, JsonResponse

from runs.engine.storage.db import connection_lost, drop_connection

RETRY_AFTER_SECONDS = 5
MESSAGE = "The database connection was lost while answering; try again in a few seconds."


def database_unavailable(*, api: bool):
    """The 503 answer: JSON with a "detail" sentence for the API, a short page otherwise."""
    if api:
        response = JsonResponse({"detail": MESSAGE}, status=503)
    else:  # no template: rendering one would ask the database for the menu's counts
        response = HttpResponse(
            f"<!doctype html><title>Try again shortly</title><h1>Try again shortly</h1><p>{MESSAGE}</p>", status=503
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class DatabaseConnectionLostMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not connection_lost(exception):
            return None  # a bug: Django's 500
        drop_connection()
        return database_unavailable(api=request.path.startswith("/api/"))

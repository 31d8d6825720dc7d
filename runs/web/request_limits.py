"""Requests over Django's limits on what it reads: a body over DATA_UPLOAD_MAX_MEMORY_SIZE, more
fields than DATA_UPLOAD_MAX_NUMBER_FIELDS, more files than DATA_UPLOAD_MAX_NUMBER_FILES.

Django answers them with a bare "Bad Request (400)" page and logs each as an ERROR with a
traceback (django.security.*), though it is the client's request, not a fault here. They are
answered with the limit in words instead: JSON with a "detail" under /api/ (the API's exception
handler, runs/web/api/errors.py, for its views), a short page elsewhere; the log keeps Django's one
WARNING line for a 4xx.
"""
from html import escape

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpResponse, JsonResponse

from apikit.errors import size_in_words

LIMIT_ERRORS = (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent)


def body_too_large_message() -> str:
    return f"The request body is larger than {size_in_words(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)}, the most this server reads."


def limit_refusal(exc: BaseException) -> tuple[int, str] | None:
    """(status, sentence) for a request over one of Django's limits; None for any other error."""
    if isinstance(exc, RequestDataTooBig):
        return 413, body_too_large_message()
    if isinstance(exc, TooManyFieldsSent):
        return 400, f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields, the most this server reads."
    if isinstance(exc, TooManyFilesSent):
        return 400, f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files, the most this server reads."
    return None


def refused(request, status: int, sentence: str):
    if request.path_info.startswith("/api/"):  # under a script prefix too
        return JsonResponse({"detail": sentence}, status=status)
    # No template: the answer needs nothing of the site (a menu's counts would ask the database).
    title = "Request too large" if status == 413 else "Request refused"
    return HttpResponse(f"<!doctype html><title>{title}</title><h1>{title}</h1><p>{escape(sentence)}</p>", status=status)


class RequestLimitsMiddleware:
    """Reads a form's body before the CSRF check does (where Django's error would escape every
    view), and answers a view that read too much itself."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.method != "POST" or getattr(view_func, "csrf_exempt", False):
            return None  # the view reads its body itself (the API's views are all exempt): see below
        try:
            request.POST  # noqa: B018  (parsed once; the CSRF check and the view read it again)
        except LIMIT_ERRORS as exc:
            return self._refuse(request, exc)
        return None

    def process_exception(self, request, exception):
        if not isinstance(exception, LIMIT_ERRORS):
            return None
        return self._refuse(request, exception)

    @staticmethod
    def _refuse(request, exc):
        request._mark_post_parse_error()  # as Django does: nothing reads the half-read body again
        return refused(request, *limit_refusal(exc))

"""The site's error answers (handler400/403/404/500 in agentsite/urls.py) for the errors no view
answered: a bug (500), a request Django refuses before any view (a host not in ALLOWED_HOSTS), a
403 or 404 raised outside the API's views. Under /api/ they are JSON with a "detail" sentence, as
every API answer is (README); elsewhere Django's pages."""
from django.core.exceptions import DisallowedHost
from django.http import JsonResponse
from django.views import defaults


def _api(request) -> bool:
    return request.path_info.startswith("/api/")  # under a script prefix too


def bad_request(request, exception):
    if not _api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, DisallowedHost):
        detail = "This server does not answer to the host name the request was sent to."
    else:
        detail = "The request is malformed and was not read."
    return JsonResponse({"detail": detail}, status=400)


def permission_denied(request, exception):
    if not _api(request):
        return defaults.permission_denied(request, exception)
    return JsonResponse({"detail": "You do not have permission to perform this action."}, status=403)


def page_not_found(request, exception):
    if not _api(request):
        return defaults.page_not_found(request, exception)
    return JsonResponse({"detail": "Not found."}, status=404)


def server_error(request):
    if not _api(request):
        return defaults.server_error(request)
    return JsonResponse({"detail": "The server failed to answer this request; the error is in its log. "
                                   "Try again, or tell the site's administrators if it goes on."}, status=500)

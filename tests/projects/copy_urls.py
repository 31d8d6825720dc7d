"""The site's URLs with the copy page in front, for the copy tests until agentsite/urls.py includes
runs.web.project_urls (the first of two identical routes answers, so this stays right after)."""
from django.urls import include, path

from agentsite.urls import urlpatterns as site_urlpatterns

urlpatterns = [path("", include("runs.web.project_urls")), *site_urlpatterns]
handler400 = "runs.web.views.errors.bad_request"
handler403 = "runs.web.views.errors.permission_denied"
handler404 = "runs.web.views.errors.page_not_found"
handler500 = "runs.web.views.errors.server_error"

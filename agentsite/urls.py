from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from accounts.oidc import SignOutView
from accounts.views import SignInView
from apikit.reference import api_reference
from runs.web.views.prometheus import prometheus_metrics

urlpatterns = [
    # Pages without base.html (error pages, the raw API) and browsers that ask anyway find the icon.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("login/", SignInView.as_view(), name="login"),
    path("logout/", SignOutView.as_view(), name="logout"),  # also at the identity provider, if any
    path("oidc/", include("accounts.oidc_urls")),  # single sign-on (OpenID Connect), when configured
    path("admin/", admin.site.urls),
    path("metrics", prometheus_metrics, name="prometheus-metrics"),
    path("tools/", include("toolsapp.urls")),
    path("api/v1/", include("evals.api_urls")),
    path("api/docs/", api_reference, name="api_docs"),  # the API reference (Swagger UI, vendored), signed in
    path("api/", include("runs.web.api.urls")),
    path("", include("projects.urls")),  # the projects a person sees, and their role in each
    path("", include("accounts.urls")),  # chat identities, mapped on the projects page
    path("", include("audit.urls")),  # the audit log of administration (administrators)
    path("", include("memory.urls")),  # an agent's long-term memory, under its page
    path("", include("evals.urls")),  # datasets, experiments, and "Add to a dataset" from a run
    path("", include("runs.web.project_urls")),  # copying an agent or a tool into a project
    path("", include("runs.web.urls")),
]

# Errors no view answered: JSON with a "detail" under /api/, Django's pages elsewhere.
handler400 = "runs.web.views.errors.bad_request"
handler403 = "runs.web.views.errors.permission_denied"
handler404 = "runs.web.views.errors.page_not_found"
handler500 = "runs.web.views.errors.server_error"

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from accounts.views import SignInView
from runs.views.prometheus import prometheus_metrics

urlpatterns = [
    path("login/", SignInView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("metrics", prometheus_metrics, name="prometheus-metrics"),
    path("tools/", include("toolsapp.urls")),
    path("api/", include("runs.api.urls")),
    path("", include("runs.urls")),
]

"""Single sign-on's two pages; both answer 404 unless it is configured. The names are the ones
mozilla-django-oidc reverses."""

from django.urls import path

from accounts.oidc import SsoCallbackView, SsoStartView

urlpatterns = [
    path("authenticate/", SsoStartView.as_view(), name="oidc_authentication_init"),
    path("callback/", SsoCallbackView.as_view(), name="oidc_authentication_callback"),
]

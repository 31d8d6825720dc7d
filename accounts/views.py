from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied

from accounts.forms import SignInForm

PASSWORD_SIGNIN_OFF = "Password sign-in is switched off here: use single sign-on."


class SignInView(LoginView):
    """The sign-in page: the password form (unless LOCAL_SIGNIN=off) and the single sign-on
    button (when it is configured)."""

    form_class = SignInForm

    def post(self, request, *args, **kwargs):
        if not settings.LOCAL_SIGNIN:
            raise PermissionDenied(PASSWORD_SIGNIN_OFF)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "local_signin": settings.LOCAL_SIGNIN,
            "sso_enabled": settings.SSO_ENABLED,
            "sso_name": getattr(settings, "OIDC_PROVIDER_NAME", ""),
        }

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429  # Too Many Requests, for scripts and monitoring
        return response

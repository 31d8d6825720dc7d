from django.contrib.auth.views import LoginView

from accounts.forms import SignInForm


class SignInView(LoginView):
    form_class = SignInForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429  # Too Many Requests, for scripts and monitoring
        return response

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST

from accounts.chat_identities import chat_identity_map, chat_identity_unmap
from accounts.forms import ChatIdentityForm, SignInForm
from accounts.models import ChatIdentity
from projects.models import Membership
from projects.people import PeopleRefused, project_managed
from projects.views import form_problem, posted_id, project_answer

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


@login_required
@require_POST
def chat_identity_add(request):
    project = project_managed(request.user, request.POST.get("project", ""))
    people = list(Membership.objects.filter(project=project).values_list("user__username", flat=True))
    form = ChatIdentityForm(request.POST, people=people)
    if not form.is_valid():
        return project_answer(request, project, form_problem(form), ok=False)
    try:
        identity = chat_identity_map(actor=request.user, project=project, **form.cleaned_data)
    except PeopleRefused as refused:
        return project_answer(request, project, str(refused), ok=False)
    return project_answer(request, project, f"{identity.member_id} now acts as {identity.user.get_username()} in chat.")


@login_required
@require_POST
def chat_identity_remove(request):
    project = project_managed(request.user, request.POST.get("project", ""))
    identity = get_object_or_404(ChatIdentity.objects.select_related("user"), pk=posted_id(request, "identity"),
                                 user__memberships__project=project)
    try:
        chat_identity_unmap(actor=request.user, project=project, identity=identity)
    except PeopleRefused as refused:
        return project_answer(request, project, str(refused), ok=False)
    return project_answer(request, project, f"{identity.member_id} no longer acts as anyone in chat.")

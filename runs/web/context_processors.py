from django.conf import settings

from runs.models import Approval


def pending_approvals(request):
    """The header: pending approvals (for people allowed to see them) and the demo model flag."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    context = {"demo_model_active": not settings.LLM_API_KEY and not settings.LLM_BASE_URL}
    if user.has_perm("runs.view_approval"):
        context["pending_approvals"] = Approval.objects.filter(status=Approval.Status.PENDING).count()
    return context

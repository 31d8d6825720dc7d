from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone

from runs.models import Approval
from runs.supervision.escalation import age_text


def pending_approvals(request):
    """The header: pending approvals and the oldest one's age (for people allowed to see them),
    and the demo model flag."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    context = {"demo_model_active": not settings.LLM_API_KEY and not settings.LLM_BASE_URL}
    if user.has_perm("runs.view_approval"):
        found = Approval.objects.filter(status=Approval.Status.PENDING).aggregate(n=Count("pk"), oldest=Min("requested_at"))
        context["pending_approvals"] = found["n"]
        if found["n"] and found["oldest"]:
            # Written into the page, so the header has its final width at the first paint: added
            # by the badge's script after loading, it widened the menu, which could wrap and push
            # the page down under a pointer about to click (static/js/badge.js keeps it current).
            waited = max(0.0, (timezone.now() - found["oldest"]).total_seconds())
            context["oldest_pending_age"] = age_text(waited)
            context["oldest_pending_seconds"] = round(waited, 1)
    return context


from django.conf import settings

from projects.access import sees_every_project, visible_projects
from projects.people import admin_site_entry
from runs.controls.budget_requests import budget_requests_count
from runs.supervision.approvals.escalation import age_text
from runs.supervision.queue.cards import approvals_waiting


def pending_approvals(request):
    """The header: pending approvals and the oldest one's age (for people allowed to see them),
    and the demo model flag."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    context = {"demo_model_active": not settings.LLM_API_KEY and not settings.LLM_BASE_URL,
               # A role in every project (the platform team): the site's pages (the audit log).
               "sees_every_project": sees_every_project(user),
               # Django's admin is not cut by project: its link is for site administrators only.
               "may_enter_admin": admin_site_entry(request)}
    if user.has_perm("runs.view_approval"):
        projects = visible_projects(user)
        waiting = approvals_waiting(projects)
        context["pending_approvals"] = waiting.count
        context["expiring_approvals"] = waiting.expiring
        context["budget_waiting"] = budget_requests_count(projects) if user.has_perm("runs.view_budget") else 0
        if waiting.oldest_requested_at:
            # Written into the page, so the header has its final width at the first paint: added
            # by the badge's script after loading, it widened the menu, which could wrap and push
            # the page down under a pointer about to click (static/js/badge.js keeps it current).
            context["oldest_pending_age"] = age_text(waiting.oldest_waited_seconds)
            context["oldest_pending_seconds"] = round(waiting.oldest_waited_seconds, 1)
    return context

"""The header's project: which one the person works in, and a switch to another of theirs."""
from django import template

from projects.current import current_project, switchable_projects

register = template.Library()


@register.inclusion_tag("projects/_project_switch.html", takes_context=True)
def project_switch(context):
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"current": None}
    return {"current": current_project(user), "projects": switchable_projects(user),
            "next": request.get_full_path(), "csrf_token": context.get("csrf_token")}

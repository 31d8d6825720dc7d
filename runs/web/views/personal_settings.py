"""Your settings: what one person chooses for themselves. Today: a browser notification and a sound
when a call arrives that they may decide (static/js/notify.js).

Nothing is stored here: the choices live in the browser (localStorage), because the permission
they depend on is the browser's too, per browser and per site; a person who turns notifications on
at work has not asked for them on their phone. The page says which calls would be announced."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL


@login_required
@require_GET
def personal_settings(request):
    user = request.user
    return render(request, "runs/personal_settings.html", {
        "may_see_approvals": user.has_perm(PERM_VIEW_APPROVAL),
        "may_decide": user.has_perm(PERM_VIEW_APPROVAL) and user.has_perm(PERM_DECIDE),
        "roles": [group.name for group in user.groups.order_by("name")],
    })

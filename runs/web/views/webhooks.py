"""The webhooks settings page (admins): the receivers of notifications, each with its latest
deliveries; add one, send it a test, remove it."""
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from projects.access import scoped, visible_projects
from runs.models import Webhook, WebhookDelivery
from runs.notifications.webhooks import webhook_add, webhook_switch, webhook_test
from runs.roles import PERM_MANAGE_WEBHOOKS
from runs.web.forms.webhooks import WebhookForm
from toolsapp import net

DELIVERIES_SHOWN = 10


def _receivers(user) -> list[dict]:
    """Every receiver of the projects the person sees (the settings page's, then, for people of
    every project, WEBHOOK_URLS': the site's), each with its latest deliveries."""
    hooks = scoped(Webhook.objects.select_related("created_by", "project"), user)
    rows = [{"webhook": w, "url": w.url, "from_environment": False} for w in hooks]
    known = {row["url"] for row in rows}
    if visible_projects(user) is None:
        rows += [{"webhook": None, "url": url, "from_environment": True} for url in settings.WEBHOOK_URLS
                 if url not in known]
    for row in rows:
        row["deliveries"] = list(WebhookDelivery.objects.filter(url=row["url"]).order_by("-created_at", "-pk")[:DELIVERIES_SHOWN])
    return rows


@login_required
@permission_required(PERM_MANAGE_WEBHOOKS, raise_exception=True)
def webhook_settings(request):
    form = WebhookForm(request.POST if request.method == "POST" else None, user=request.user)
    if form.is_bound and form.is_valid():
        try:
            webhook = webhook_add(url=form.cleaned_data["url"], description=form.cleaned_data["description"],
                                  user=request.user, project=form.cleaned_data["project"])
        except net.Blocked as exc:  # the address changed between the form's check and now
            form.add_error("url", f"Refused: {exc}.")
        else:
            messages.success(request, f"Webhook {webhook.url} added: new notifications go to it too.")
            return redirect("webhook_settings")
    return render(request, "runs/webhooks.html", {
        "form": form, "receivers": _receivers(request.user), "signed": bool(settings.WEBHOOK_SECRET),
    })


@login_required
@permission_required(PERM_MANAGE_WEBHOOKS, raise_exception=True)
@require_POST
def webhook_test_view(request, pk: int):
    webhook = get_object_or_404(Webhook, pk=pk)
    webhook_test(webhook=webhook, user=request.user)
    messages.success(request, f"A test notification is on its way to {webhook.url}: its delivery is listed below.")
    return redirect(reverse("webhook_settings") + f"#webhook-{webhook.pk}")


@login_required
@permission_required(PERM_MANAGE_WEBHOOKS, raise_exception=True)
@require_POST
def webhook_switch_view(request, pk: int):
    webhook = get_object_or_404(Webhook, pk=pk)
    enabled = request.POST.get("enabled") == "true"
    webhook_switch(webhook=webhook, enabled=enabled)
    if enabled:
        messages.success(request, f"Webhook {webhook.url} is on: new notifications go to it.")
    else:
        messages.success(request, f"Webhook {webhook.url} is off: it gets no new notifications until it is turned on.")
    return redirect(reverse("webhook_settings") + f"#webhook-{webhook.pk}")


@login_required
@permission_required(PERM_MANAGE_WEBHOOKS, raise_exception=True)
@require_POST
def webhook_delete_view(request, pk: int):
    webhook = get_object_or_404(Webhook, pk=pk)
    url = webhook.url
    webhook.delete()
    messages.success(request, f"Webhook {url} removed: it gets no new notifications (its past deliveries stay listed).")
    return redirect("webhook_settings")

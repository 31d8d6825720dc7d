"""Slack's interactivity endpoint: a click on Approve or Reject in the chat channel. No session
and no CSRF token (Slack cannot send either): the request is trusted only once its signature
and timestamp check out (runs/supervision/chat/clicks.py)."""
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from audit.context import client_ip
from runs.supervision.chat.clicks import interaction_handle

MAX_BODY_BYTES = 64 * 1024


@csrf_exempt
@require_POST
def slack_interactions(request):
    if len(request.body) > MAX_BODY_BYTES:
        return HttpResponse("too large", status=413, content_type="text/plain")
    status, words = interaction_handle(
        body=request.body, timestamp=request.headers.get("X-Slack-Request-Timestamp", ""),
        signature=request.headers.get("X-Slack-Signature", ""), address=client_ip(request) or None,
    )
    return HttpResponse(words if status != 200 else "", status=status, content_type="text/plain")

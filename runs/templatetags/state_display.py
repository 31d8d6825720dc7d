"""Template filters of how long ago something happened, in the short words the header badge uses
(a card's state check, the queue's oldest wait, a budget request's wait)."""
from django import template
from django.utils import timezone

from runs.supervision.evidence.text import age_text

register = template.Library()


@register.filter
def ago(moment) -> str:
    """ "4 s ago", "3 min ago", "2 h 5 min ago", "3 d 4 h ago" ("" for no time): the header badge's words."""
    return f"{waited(moment)} ago" if moment is not None else ""


@register.filter
def waited(moment) -> str:
    """How long since `moment`, as the header badge says it ("12 s", "4 min"), never "0 minutes"."""
    if moment is None:
        return ""
    return age_text((timezone.now() - moment).total_seconds())

"""Template filters of a card's state check: how long ago it answered, in the short words a card uses."""
from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def ago(moment) -> str:
    """ "4 s ago", "3 min ago", "2 h ago", "5 days ago" ("" for no time)."""
    if moment is None:
        return ""
    seconds = max(0, int((timezone.now() - moment).total_seconds()))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"

"""Template filters of the Supervision page: durations in short words, a contradiction's reason."""
from django import template

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """ "4.5 s", "40 s", "1 min 40 s", "2 h 5 min", "2 d 5 h"; "—" for none."""
    if seconds is None:
        return "—"
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def lookup(mapping: dict, key):
    return mapping.get(key, key)

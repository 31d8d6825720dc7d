"""Template filters of the approval pages: who or what decided, in the words the pages use, and
the state a tool result reports, marked where a person reads it."""
import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

register = template.Library()

# A field of a tool result that says what state a thing is in ("status": "cancelled"): what a
# person deciding a change of that thing must see first. Only short string values: a state, not prose.
_STATE_FIELD = re.compile(r'"(status|state)"\s*:\s*"([^"\\\n]{1,60})"', re.IGNORECASE)
_STATE_SCAN_CHARS = 20_000


@register.filter
def decider(approval) -> str:
    """ "alice", "rule 'refunds under 50' v3", "a grant for this run", "the run's policy", "expiry"."""
    return approval.decider  # Approval.decider: the one definition


@register.filter
def reported_states(text) -> list[str]:
    """The states a result reports, in its words: ["status: cancelled"] (at most three)."""
    found = dict.fromkeys(f"{m.group(1).lower()}: {m.group(2)}" for m in _STATE_FIELD.finditer(str(text or "")[:_STATE_SCAN_CHARS]))
    return list(found)[:3]


@register.filter(needs_autoescape=True)
def states_marked(text, autoescape=True):
    """The result's text, escaped, with each state value it reports in <mark>."""
    text = str(text or "")
    esc = conditional_escape if autoescape else (lambda s: s)
    parts, last = [], 0
    for match in _STATE_FIELD.finditer(text[:_STATE_SCAN_CHARS]):
        start, end = match.span(2)
        parts += [esc(text[last:start]), '<mark class="read-state">', esc(match.group(2)), "</mark>"]
        last = end
    parts.append(esc(text[last:]))
    return mark_safe("".join(str(p) for p in parts))

"""Template filters of the approval pages: who or what decided, in the words the pages use."""
from django import template

from runs.supervision.queue import approval_decider

register = template.Library()


@register.filter
def decider(approval) -> str:
    """ "alice", "rule 'refunds under 50' v3", "a grant for this run", "the run's policy", "expiry"."""
    return approval_decider(approval)

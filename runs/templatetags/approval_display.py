"""Template filters of the approval pages: who or what decided, in the words the pages use."""
from django import template

register = template.Library()


@register.filter
def decider(approval) -> str:
    """ "alice", "rule 'refunds under 50' v3", "a grant for this run", "the run's policy", "expiry"."""
    return approval.decider  # Approval.decider: the one definition

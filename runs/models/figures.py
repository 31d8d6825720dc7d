"""A run's own counters as SQL expressions: what it did itself, less what a fork inherited from its
parent. The metrics page, its rollups, /metrics, the budget alerts and the budgets that pause runs
all count with these (runs/observability/metrics/own_work.py says why a fork's copies are its
parent's); they sit at the bottom so that every layer counts with the same ones."""
from django.db.models import F


def own_iterations():
    """A run's iterations less those it inherited (an expression over Run)."""
    return F("iterations") - F("inherited_iterations")


def own_tokens():
    """A run's tokens, in and out, less those it inherited."""
    return F("tokens_in") + F("tokens_out") - F("inherited_tokens_in") - F("inherited_tokens_out")


def own_cost():
    """A run's cost in USD less what it inherited."""
    return F("cost_usd") - F("inherited_cost_usd")

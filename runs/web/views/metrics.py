from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import render

from hosting.replica import reads_from_replica
from projects.access import may_see
from runs.observability.metrics.page import budget_alerts_recent, metrics_with_series
from runs.roles import PERM_VIEW
from runs.web.forms.filters import MetricsFilterForm


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@reads_from_replica  # slightly stale is fine here (hosting/replica.py)
def metrics(request):
    form = MetricsFilterForm(request.GET, user=request.user)
    summary = series = None
    if form.is_valid():
        data = form.cleaned_data
        summary, series = metrics_with_series(start=data["date_from"], end=data["date_to"], agent=data["agent"])
    return render(
        request, "runs/metrics.html",
        {"form": form, "m": summary, "charts": _charts(summary), "series": series,
         "alerts": [a for a in budget_alerts_recent() if may_see(request.user, a.agent.project_id)],
         "wait_tables": _wait_tables(summary)},
    )


def _wait_tables(summary) -> list[tuple]:
    """(title, table id, rows, what a row is) of the two approval wait tables."""
    if summary is None:
        return []
    return [
        ("Approval wait by rule", "table-wait-by-rule", summary.supervision.wait_by_rule, "Rule"),
        ("Approval wait by tool", "table-wait-by-tool", summary.supervision.wait_by_tool, "Tool"),
    ]


def _charts(summary) -> dict:
    """Bar widths (percent of the largest value) for the CSS bar charts."""
    if summary is None:
        return {}
    return {
        "status": _bars([(row.label, row.value, row.count, row.count) for row in summary.by_status]),
        "stop_reason": _bars([(row.label, row.value, row.count, row.count) for row in summary.by_stop_reason]),
        "tokens_per_day": _bars([(day.day, day, day.tokens, day.tokens) for day in summary.per_day]),
    }


def _bars(rows: list[tuple]) -> list[dict]:
    largest = max((size for *_, size in rows), default=0) or 1
    return [
        {"label": label, "item": item, "value": value, "width": round(100 * size / largest, 1)}
        for label, item, value, size in rows
    ]

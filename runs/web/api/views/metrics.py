"""Metrics of a period, as on the metrics page."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apikit.schema import errors, form_parameters
from apikit.views import ApiView, form_or_400
from runs.observability.metrics.page import metrics_summary
from runs.roles import PERM_VIEW
from runs.web.forms.filters import MetricsFilterForm


class MetricsView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}

    @extend_schema(
        operation_id="metrics_retrieve", summary="Outcomes, iterations, tool errors, model latency, usage per day, approval waits and who decides",
        parameters=form_parameters(MetricsFilterForm),
        responses={200: OpenApiTypes.OBJECT, **errors(400)},
    )
    def get(self, request):
        data = form_or_400(MetricsFilterForm(request.query_params, user=request.user))
        m = metrics_summary(start=data["date_from"], end=data["date_to"], agent=data["agent"])
        counts = lambda rows: [{"value": r.value, "label": r.label, "count": r.count} for r in rows]  # noqa: E731
        return Response({
            "start": m.start,
            "end": m.end,
            "agent_id": m.agent.pk if m.agent else None,
            **{name: found.value for name, found in m.figures.items()},  # declared in metrics/figures.py
            "by_status": counts(m.by_status),
            "by_stop_reason": counts(m.by_stop_reason),
            "iterations": {"count": m.iterations.count, "p50": m.iterations.p50, "p95": m.iterations.p95},
            "tool_errors": [
                {"tool": r.tool, "finished": r.finished, "failed": r.failed, "rejected": r.rejected,
                 "error_rate": r.error_rate}
                for r in m.tool_errors
            ],
            "model_latency": [
                {"model": r.model, "steps": r.steps, "p50_ms": r.p50_ms, "p95_ms": r.p95_ms} for r in m.model_latency
            ],
            "per_day": [{"day": d.day, "runs": d.runs, "tokens": d.tokens, "cost_usd": d.cost_usd} for d in m.per_day],
            "approvals": {
                "approved": m.approvals.approved,
                "rejected": m.approvals.rejected,
                "expired": m.approvals.expired,
                "closed": m.approvals.closed,
                "pending": m.approvals.pending,
                "wait_seconds": {"count": m.approvals.wait_seconds.count, "p50": m.approvals.wait_seconds.p50,
                                 "p95": m.approvals.wait_seconds.p95},
            },
            "supervision": supervision_data(m.supervision),
        })


def supervision_data(s) -> dict:
    waits = lambda rows: [{"key": r.key, "count": r.count, "p50": r.p50, "p90": r.p90} for r in rows]  # noqa: E731
    return {
        "decided": s.decided,
        "deciders": [{"kind": d.kind, "label": d.label, "count": d.count, "share": d.share} for d in s.deciders],
        "rule_hits": [
            {"rule_name": r.rule_name, "rule_version": r.rule_version, "hits": r.hits, "approved": r.approved,
             "rejected": r.rejected, "sent_to_people": r.asked}
            for r in s.rule_hits
        ],
        "time_saved": {
            "calls": s.saved_calls,
            "minutes": s.saved_minutes,
            "person_wait_p50_seconds": s.person_wait_p50,
            "computed_as": "calls decided by rules or grants x median wait of people's decisions (asked to decided)",
        },
        "person_wait_seconds": {"count": s.person_decisions, "p50": s.person_wait_p50, "p90": s.person_wait_p90},
        "wait_by_rule": waits(s.wait_by_rule),
        "wait_by_tool": waits(s.wait_by_tool),
    }

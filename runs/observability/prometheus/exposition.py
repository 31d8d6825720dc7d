"""/metrics in the Prometheus text format, written by the official `prometheus-client`.

Every figure is read from the database at scrape time by one custom collector (the queries are
in runs/observability/prometheus/counters.py), not counted in the process that did the work: runs are driven
by many Celery worker processes on many hosts, and a counter kept in one of them would be
scraped from none (workers serve no HTTP) or from one web process that never saw the work.
The database already holds every run, model call, tool call and decision, committed with the
work itself, so any web process answers with the same, complete figures. (The client's
multiprocess mode shares files between the processes of one host only: each worker host would
need an HTTP exporter of its own, and what a worker counted before it died without committing
would be counted again by the worker that redoes it.)

Who may scrape is decided by the view (runs/web/views/prometheus.py).
"""
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from runs.observability.prometheus import counters as q
from runs.observability.prometheus.decision_counters import DECIDE_BUCKETS, decision_quality_figures

PREFIX = "agentsite"


def _histogram(name: str, documentation: str, labels: list[str], bounds, rows) -> HistogramMetricFamily:
    family = HistogramMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)
    for h in rows:
        buckets = [(repr(float(bound)), n) for bound, n in zip(bounds, h.cumulative)] + [("+Inf", h.count)]
        family.add_metric(list(h.labels), buckets, h.total)
    return family


def _counter(name: str, documentation: str, labels: list[str], totals: dict) -> CounterMetricFamily:
    family = CounterMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)
    for key, value in totals.items():
        family.add_metric(list(key), value)
    return family


class DatabaseCollector:
    """Collects every family from the database, once per scrape."""

    def describe(self):
        return []  # nothing is read when the collector is registered

    def collect(self):
        pruned = q.pruned_totals()
        runs = q.run_figures(pruned)
        yield _counter("runs_started", "Runs a worker started.", ["agent"], runs.started)
        yield _counter("runs_ended", "Runs that ended, by final status and stop reason.",
                       ["agent", "status", "stop_reason"], runs.ended)
        yield _counter("run_iterations", "Loop iterations of runs.", ["agent"], runs.iterations)
        yield _counter("lease_takeovers", "Times a worker took a run over from a worker that died.", ["agent"],
                       runs.takeovers)
        yield _counter("context_compactions", "Model requests that summarised older tool results to fit the "
                       "context budget.", ["agent"], runs.compactions)
        usage, latency = q.model_figures(pruned)
        tokens = {}
        for (agent, model), value in usage.items():
            tokens[(agent, model, "input")] = value["tokens_in"]
            tokens[(agent, model, "output")] = value["tokens_out"]
        yield _counter("model_tokens", "Tokens of model calls.", ["agent", "model", "direction"], tokens)
        yield _counter("model_cached_input_tokens", "Input tokens read from the provider's prompt cache (part of "
                       "the input tokens).", ["agent", "model"],
                       {key: value.get("tokens_cached", 0) for key, value in usage.items()})
        yield _counter("model_reasoning_output_tokens", "Output tokens spent on reasoning (part of the output "
                       "tokens).", ["agent", "model"], {key: value.get("tokens_reasoning", 0) for key, value in usage.items()})
        yield _counter("model_cost_usd", "Cost of model calls in US dollars.", ["agent", "model"],
                       {key: value["cost_usd"] for key, value in usage.items()})
        yield _histogram("model_request_duration_seconds", "Seconds a model call took, by the model that answered.",
                         ["model"], q.MODEL_LATENCY_BUCKETS, latency)
        calls, latency = q.tool_figures(pruned)
        yield _counter("tool_calls", "Tool calls that reached an outcome.", ["tool", "status"], calls)
        yield _histogram("tool_call_duration_seconds", "Seconds a tool call ran.", ["tool", "status"],
                         q.TOOL_LATENCY_BUCKETS, latency)
        pending = GaugeMetricFamily(f"{PREFIX}_approvals_pending", "Tool calls waiting for a decision now.")
        pending.add_metric([], q.approvals_pending())
        yield pending
        decided, wait = q.decision_figures()
        yield _counter("approvals_decided", "Decisions on tool calls, by outcome and by who decided "
                       "(person, rule, automatic: the run's policy or a grant, expiry, run_ended: closed because the run ended).",
                       ["outcome", "decider"], decided)
        yield _histogram("approval_wait_seconds", "Seconds from asking to deciding, by who decided.", ["decider"],
                         q.APPROVAL_WAIT_BUCKETS, wait)
        yield from _decision_quality(pruned)
        busy = GaugeMetricFamily(f"{PREFIX}_worker_slots_busy",
                                 "Runs a worker drives now (a live lease holds one worker thread), all hosts.")
        busy.add_metric([], q.runs_driven())
        yield busy


def _decision_quality(pruned: dict):
    """How people decide, per project (runs/observability/prometheus/decision_counters.py)."""
    found = decision_quality_figures(pruned)
    yield _counter("project_decisions", "Decisions on tool calls per project, by who or what decided (person, rule, "
                   "grant, policy: the run's own, expiry, run_ended).", ["project", "decider"], found["decided"])
    yield _histogram("approval_decide_seconds", "Seconds from a card appearing (first shown to someone who may "
                     "decide it, else asked) to a person's decision, per project.", ["project"], DECIDE_BUCKETS,
                     found["decide_seconds"])
    yield _counter("approvals_quick", "People's approvals within the project's quick_approval_seconds of the card "
                   "appearing.", ["project"], found["quick"])
    yield _counter("approvals_contradicted", "Approved calls later contradicted, by who approved and why (failed; "
                   "moot: already done; reversed by a later call on the same thing).", ["project", "decider", "why"],
                   found["contradicted"])
    yield _counter("nudges_shown", "Cards that asked their person for a reason before Approve after a streak of "
                   "quick approvals.", ["project"], found["nudges"])


def metrics_text() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    return generate_latest(registry)

"""The metrics page's time series (runs/observability/metrics/series.py) against the hand-made
dataset of test_metrics.py: every point's counts add up to the page's totals, from the runs' rows
and from the rollups alike."""
from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import call_command

from runs.models import Agent
from runs.observability.metrics.page import metrics_summary, metrics_with_series
from tests.observability.metrics.test_metrics import END, START, at, dataset, run, step  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def charts(series: dict) -> dict:
    return {chart["id"]: chart for chart in series["charts"]}


def totals(chart: dict) -> dict:
    return {s["label"]: sum(v or 0 for v in s["values"]) for s in chart["series"]}


def test_a_week_has_a_point_per_day_that_adds_up_to_the_page(dataset):  # noqa: F811
    summary, series = metrics_with_series(start=START, end=END)
    found = charts(series)
    assert series["unit"] == "day" and len(found["runs"]["x"]) == 7
    assert totals(found["runs"]) == {row.label: row.count for row in summary.by_status}
    assert found["tokens"]["series"][0]["values"] == [day.tokens for day in summary.per_day]
    deciders = totals(found["deciders"])
    assert deciders == {row.label: row.count for row in summary.supervision.deciders if row.count}
    assert {s["label"] for s in found["latency"]["series"]} >= {"fast p50", "fast p95"}


def test_a_day_has_a_point_per_hour(dataset):  # noqa: F811
    day = date(2026, 3, 2)  # the dataset's runs are created at noon
    summary, series = metrics_with_series(start=day, end=day)
    found = charts(series)
    assert series["unit"] == "hour" and len(found["runs"]["x"]) == 24
    assert totals(found["runs"]) == {row.label: row.count for row in summary.by_status}
    noon = found["runs"]["x"].index(int(datetime(2026, 3, 2, 12, tzinfo=UTC).timestamp()))
    assert sum(s["values"][noon] for s in found["runs"]["series"]) == summary.runs_total > 0


def test_the_rollups_give_the_same_series_as_the_runs_rows(dataset, settings):  # noqa: F811
    settings.METRICS_ROLLUPS = False
    _, raw = metrics_with_series(start=START, end=END)
    call_command("rebuild_rollups")
    settings.METRICS_ROLLUPS = True
    _, rolled = metrics_with_series(start=START, end=END)
    for chart in ("runs", "error-rate", "tokens", "tool-errors", "deciders", "latency", "approval-wait"):
        assert charts(rolled)[chart] == charts(raw)[chart], chart


def test_over_two_months_the_rollups_give_the_runs_rows_series_with_percentiles_per_month(dataset, settings):  # noqa: F811
    # Longer than DAILY_PERCENTILE_DAYS: percentiles per month, read from month rows less the
    # days outside the window, or from the days themselves; the runs before and after the week
    # (its "outside" and "late" runs) are in this window; a run of March 30, after it, is in the
    # month row of March and must be taken away.
    start, end = START - timedelta(days=40), END + timedelta(days=20)
    after = run(Agent.objects.get(name="alpha"), created=at(30))
    step(after, "fast", 50_000.0)
    settings.METRICS_ROLLUPS = False
    raw_summary, raw = metrics_with_series(start=start, end=end)
    call_command("rebuild_rollups")
    settings.METRICS_ROLLUPS = True
    summary, rolled = metrics_with_series(start=start, end=end)
    assert charts(rolled)["latency"]["unit"] == "month" and len(charts(rolled)["latency"]["x"]) == 3
    for chart in ("runs", "error-rate", "tokens", "tool-errors", "deciders", "latency", "approval-wait"):
        assert charts(rolled)[chart] == charts(raw)[chart], chart
    assert totals(charts(rolled)["runs"]) == {row.label: row.count for row in summary.by_status}
    assert summary.runs_total == raw_summary.runs_total
    # The buckets the charts read per point are summed for the figures: the same as read alone.
    assert summary == metrics_summary(start=start, end=end)
    assert metrics_with_series(start=START, end=END)[0] == metrics_summary(start=START, end=END)
    fast = next(s for s in charts(rolled)["latency"]["series"] if s["label"] == "fast p95")
    assert 9000 < max(v for v in fast["values"] if v is not None) < 50_000  # outside and late: 9999 ms

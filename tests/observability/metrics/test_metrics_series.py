"""The metrics page's time series (runs/observability/metrics/series.py) against the hand-made
dataset of test_metrics.py: every point's counts add up to the page's totals, from the runs' rows
and from the rollups alike."""
from datetime import UTC, date, datetime

import pytest
from django.core.management import call_command

from runs.observability.metrics.page import metrics_with_series
from tests.observability.metrics.test_metrics import END, START, dataset  # noqa: F401 (a fixture)

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

"""Exports stream, and what they hold at once stays bounded: the steps read by one query are at
most STEP_BATCH (or one run's), however many long runs are exported."""
import json
import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.lifecycle.exports import STEP_BATCH
from runs.models import Agent, Run, Step
from tests.lifecycle.test_history import make_run
from tests.web.api.test_api import api

RUNS, STEPS = 12, 300  # 3600 steps in all, more than STEP_BATCH


def long_runs(agent) -> list[Run]:
    runs = [make_run(agent, f"task {n}") for n in range(RUNS)]
    Step.objects.bulk_create([
        Step(run=run, index=i, iteration=i, model="m", message={"role": "assistant"})
        for run in runs for i in range(1, STEPS + 1)
    ])
    return runs


def test_an_export_of_many_long_runs_streams_and_reads_a_bounded_number_of_steps_at_once(demo_data):
    from tests.support.approval_fixtures import make_user

    assert RUNS * STEPS > STEP_BATCH
    runs = long_runs(Agent.objects.get(name="demo"))
    client = api(make_user("vera", "viewers"))
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/runs/export.jsonl")
        assert response.streaming
        lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert sorted(r["run_id"] for r in lines) == sorted(r.pk for r in runs)
    assert all([s["index"] for s in r["steps"]] == list(range(1, STEPS + 1)) for r in lines)

    step_reads = [q["sql"] for q in queries if re.search(r'FROM "runs_step"', q["sql"]) and "COUNT(" not in q["sql"]]
    assert step_reads
    for sql in step_reads:
        ids = [int(pk) for pk in re.findall(r"\d+", re.search(r'"run_id" IN \(([^)]*)\)', sql).group(1))]
        assert Step.objects.filter(run_id__in=ids).count() <= STEP_BATCH

    csv_response = client.get("/api/v1/runs/export.csv")
    assert csv_response.streaming
    rows = b"".join(csv_response.streaming_content).decode().splitlines()
    assert len(rows) == 1 + RUNS * STEPS  # a header, then one row per step (none has calls)

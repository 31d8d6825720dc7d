"""The issue's reproduction: a worker whose SQLite database is named by DATABASE_URL (as a new
user would give it) takes 20 approval-requesting runs posted one after another, and none ends
with "database is locked": it has the default's IMMEDIATE transactions, busy timeout and WAL."""
import pytest
from django.db import connection

from runs.models import Approval, Run
from tests.conftest import wait_until
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import CANCEL_TASK, api

RUNS = 20


@pytest.mark.skipif(connection.vendor != "sqlite", reason="about SQLite named by a URL")
def test_twenty_runs_asking_for_approval_on_a_sqlite_url_all_wait_for_a_person(celery_worker_proc, demo_data):
    celery_worker_proc(env={"DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}", "SQLITE_PATH": None})
    client = api(make_user("olga", "operators"))
    ids = []
    for _ in range(RUNS):
        response = client.post("/api/v1/runs/", {"agent": "demo", "task": CANCEL_TASK}, format="json")
        assert response.status_code == 201, response.json()
        ids.append(response.json()["run_id"])

    def settled():
        return not Run.objects.filter(pk__in=ids, status__in=(Run.Status.QUEUED, Run.Status.RUNNING)).exists()

    wait_until(settled, timeout=120, message="every run to stop running")
    outcomes = {run.pk: (run.status, run.stop_detail) for run in Run.objects.filter(pk__in=ids)}
    assert [o for o in outcomes.values() if o[0] != Run.Status.AWAITING_APPROVAL] == []
    assert Approval.objects.filter(run_id__in=ids, status=Approval.Status.PENDING).count() == RUNS

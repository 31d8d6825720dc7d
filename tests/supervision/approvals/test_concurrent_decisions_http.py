"""Two operators deciding the same approvals at the same moment, over HTTP, on the database the
tests run on (SQLite by default, the installation's default too), with runs driven by a real
worker: every decision is answered 200 or 409 (never 500), each approval has exactly one winner,
and every run ends normally. bench/sqlite_decisions.py does the same with 20 runs against the
system as `manage.py up` starts it.
"""
import threading

import pytest
import requests

from accounts.services import api_token_create
from runs.models import Approval, Run

pytestmark = pytest.mark.worker

RUNS = 6
FINISHED = (Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED)


def test_two_operators_deciding_every_approval_at_once_get_one_winner_and_no_error(
    celery_worker_proc, live_server, alice, bob, wait_for, wait_for_run
):
    celery_worker_proc()
    base = live_server.url
    headers = {user.username: {"Authorization": f"Token {api_token_create(user=user)[1]}"} for user in (alice, bob)}

    launched = []
    at_once = threading.Barrier(RUNS)

    def launch():
        at_once.wait()
        r = requests.post(f"{base}/api/v1/runs/", json={"agent": "demo", "task": "Cancel order ORD-1001"},
                          headers=headers["alice"], timeout=60)
        launched.append((r.status_code, r.json().get("run_id")))

    threads = [threading.Thread(target=launch) for _ in range(RUNS)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert [code for code, _ in launched] == [201] * RUNS, launched
    run_ids = [run_id for _, run_id in launched]
    wait_for(lambda: Approval.objects.filter(run_id__in=run_ids, status=Approval.Status.PENDING).count() == RUNS,
             message="every run to wait for its approval")

    answers: list[tuple[int, str, int]] = []
    everyone = threading.Barrier(2 * RUNS)

    def decide(approval_id: int, who: str, verb: str):
        everyone.wait()
        r = requests.post(f"{base}/api/v1/approvals/{approval_id}/{verb}/", json={"reason": "no"},
                          headers=headers[who], timeout=60)
        answers.append((approval_id, who, r.status_code))

    approvals = list(Approval.objects.filter(run_id__in=run_ids).values_list("pk", flat=True))
    threads = [threading.Thread(target=decide, args=(pk, who, verb))
               for pk in approvals for who, verb in (("alice", "approve"), ("bob", "reject"))]
    [t.start() for t in threads]
    [t.join() for t in threads]

    assert {code for _, _, code in answers} == {200, 409}, answers
    for pk in approvals:
        codes = sorted(code for approval_id, _, code in answers if approval_id == pk)
        assert codes == [200, 409], f"approval {pk}: {codes}"
    for run_id in run_ids:
        run = wait_for_run(run_id, *FINISHED)
        assert run.status == Run.Status.SUCCEEDED, (run.status, run.stop_reason, run.stop_detail)

"""The read replica's checks, run in a process of their own configured as a deployment with a
replica is: DATABASE_URL the pair's primary, DATABASE_REPLICA_URL its streaming replica
(tests/support/pg_pair.py). tests/site/test_read_replica.py starts the pair and runs each check:

    python -m tests.support.replica_checks CHECK      (PGPAIR: the pair, as PgPair.to_json gives it)

A check passes when it returns; a failed assertion exits non-zero with its traceback.
"""

import json
import os
import sys
import time
import uuid

from tests.support.pg_pair import PgPair

PAIR = PgPair.from_json(os.environ["PGPAIR"])
os.environ.update(
    DATABASE_URL=PAIR.url("primary"),
    DATABASE_REPLICA_URL=PAIR.url("replica"),
    DJANGO_SETTINGS_MODULE="agentsite.settings",
    LOG_LEVEL="WARNING",
    METRICS_TOKEN="replica-checks",
)

import django  # noqa: E402

django.setup()
from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

from hosting import replica  # noqa: E402
from runs.models import Agent, Run  # noqa: E402

setup_test_environment()  # the test client's host, and the pages' contexts on their responses
call_command("migrate", verbosity=0)


def signed_in() -> Client:
    user, _ = get_user_model().objects.get_or_create(username="replica-admin", defaults={"is_superuser": True})
    client = Client()
    client.force_login(user)
    return client


def ended_run(agent: Agent, task: str) -> Run:
    return Run.objects.create(agent=agent, task=task, status=Run.Status.SUCCEEDED,
                              stop_reason=Run.StopReason.FINAL_ANSWER, finished_at=timezone.now(), iterations=1)


def history_tasks(client: Client, agent: Agent) -> set[str]:
    response = client.get("/runs/", {"agent": agent.pk})
    assert response.status_code == 200, response.status_code
    return {run.task for run in response.context["page"].runs}


def api_tasks(client: Client, agent: Agent) -> set[str]:
    response = client.get("/api/v1/runs/", {"agent": agent.pk})
    assert response.status_code == 200, response.status_code
    return {row["task_preview"] for row in response.json()["results"]}


def export_tasks(client: Client, agent: Agent) -> set[str]:
    response = client.get("/api/v1/runs/export.jsonl", {"agent": agent.pk})
    assert response.status_code == 200, response.status_code
    return {json.loads(line)["task"] for line in b"".join(response.streaming_content).splitlines()}


def metrics_runs(client: Client, agent: Agent) -> int:
    response = client.get("/metrics/", {"agent": agent.pk})
    assert response.status_code == 200, response.status_code
    return response.context["m"].runs_total


def scraped_runs(client: Client, agent: Agent) -> float:
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer replica-checks")
    assert response.status_code == 200, response.status_code
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in response.content.decode().splitlines()
        if line.startswith("agentsite_runs_ended_total{") and f'agent="{agent.name}"' in line
    )


def fresh_agent() -> Agent:
    return Agent.objects.create(name=f"replica-{uuid.uuid4().hex[:8]}")


def check_pages_read_the_replica_and_decisions_the_primary():
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 600  # a paused replica is still read
    settings.DATABASE_REPLICA_CHECK_SECONDS = 0
    client, agent = signed_in(), fresh_agent()
    ended_run(agent, "seen by both")
    PAIR.caught_up()
    PAIR.pause_replay()
    try:
        late = ended_run(agent, "on the primary only")
        assert history_tasks(client, agent) == {"seen by both"}
        assert api_tasks(client, agent) == {"seen by both"}
        assert export_tasks(client, agent) == {"seen by both"}
        assert metrics_runs(client, agent) == 1
        assert scraped_runs(client, agent) == 1
        # What a decision or a lever reads is the primary's: the run page, a cancel.
        assert client.get(f"/runs/{late.pk}/").status_code == 200
        assert Run.objects.filter(agent=agent).count() == 2  # outside a page: the primary
        with replica.replica_reads():
            assert Run.objects.filter(agent=agent).count() == 1
            # A write, or a read that locks, goes to the primary even inside.
            assert Run.objects.select_for_update().filter(pk=late.pk).db == "default"
            assert Run.objects.filter(pk=late.pk).update(task="renamed on the primary") == 1
    finally:
        PAIR.resume_replay()
    PAIR.caught_up()
    seen = history_tasks(client, agent)
    assert seen == {"seen by both", "renamed on the primary"}, (seen, replica.usable(), replica._state)


def check_a_replica_further_behind_than_allowed_is_not_read():
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1
    settings.DATABASE_REPLICA_CHECK_SECONDS = 0
    client, agent = signed_in(), fresh_agent()
    ended_run(agent, "old")
    PAIR.caught_up()
    assert replica.usable()
    PAIR.pause_replay()
    try:
        ended_run(agent, "new")
        time.sleep(2.5)  # the replica has not replayed "new" for longer than allowed
        assert history_tasks(client, agent) == {"old", "new"}  # from the primary
        assert not replica.usable() and replica._state["lag"] > 1
    finally:
        PAIR.resume_replay()
    PAIR.caught_up()
    assert replica.usable()


def check_a_replica_that_is_down_is_not_read_and_one_that_fails_under_a_page_is_left():
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 600
    settings.DATABASE_REPLICA_CHECK_SECONDS = 3600  # the last check says usable: the page finds out
    client, agent = signed_in(), fresh_agent()
    ended_run(agent, "before")
    PAIR.caught_up()
    replica._state["checked_at"] = float("-inf")
    assert replica.usable()
    PAIR.stop_replica()
    try:
        ended_run(agent, "while it was down")
        started = time.monotonic()
        assert history_tasks(client, agent) == {"before", "while it was down"}  # read again from the primary
        assert not replica.usable()
        assert metrics_runs(client, agent) == 2 and export_tasks(client, agent) == {"before", "while it was down"}
        settings.DATABASE_REPLICA_CHECK_SECONDS = 0  # checked at every page now: it does not answer
        assert history_tasks(client, agent) == {"before", "while it was down"}
        assert time.monotonic() - started < 20, "a replica that is down must not hold pages"
    finally:
        PAIR.start_replica()
    PAIR.caught_up()
    assert replica.usable()


if __name__ == "__main__":
    check = globals()[f"check_{sys.argv[1]}"]
    check()
    print(f"passed: {sys.argv[1]}")

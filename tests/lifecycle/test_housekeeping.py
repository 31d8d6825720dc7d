"""Periodic care: `runs_prune` / the `prune_runs` command, and what `runs_sweep` hands out again."""
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from runs.engine import dispatch
from runs.lifecycle import housekeeping
from runs.lifecycle.housekeeping import runs_prune, runs_sweep
from runs.models import Agent, Approval, ArchivedApproval, Run, RunEvent, Step, ToolCall
from runs.supervision.approvals import decide
from toolsapp.models import Tool

pytestmark = pytest.mark.django_db

S = Run.Status


@pytest.fixture
def agent():
    return Agent.objects.create(name="housekeeping")


def make_run(agent, status, *, age: timedelta = timedelta(0), children: bool = True, **fields) -> Run:
    """A run of `status` created `age` ago, with a step, a call, an approval and an event."""
    run = Run.objects.create(agent=agent, task=f"{status} run", config={"agent_name": agent.name}, status=status, **fields)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - age)
    if children:
        step = Step.objects.create(run=run, index=1, iteration=1, model="demo", message={"role": "assistant", "content": ""})
        call = ToolCall.objects.create(
            run=run, step=step, index=0, call_id=f"c{run.pk}", tool_name="cancel_order", arguments="{}",
            args_hash="h", idempotency_key=f"k{run.pk}", status=ToolCall.Status.SUCCEEDED,
        )
        Approval.objects.create(tool_call=call, run=run, status=Approval.Status.APPROVED)
        RunEvent.objects.create(run=run, seq=1, kind="run", data={"status": status})
        Run.objects.filter(pk=run.pk).update(event_seq=1)
    run.refresh_from_db()
    return run


def children_of(run_ids) -> dict:
    return {
        "steps": Step.objects.filter(run_id__in=run_ids).count(),
        "calls": ToolCall.objects.filter(run_id__in=run_ids).count(),
        "approvals": Approval.objects.filter(run_id__in=run_ids).count(),
        "events": RunEvent.objects.filter(run_id__in=run_ids).count(),
    }


@pytest.fixture
def population(agent):
    """Old finished runs (to delete), and runs that must stay: recent, or still active."""
    old = timedelta(days=40)
    doomed = [make_run(agent, status, age=old) for status in (S.SUCCEEDED, S.FAILED, S.CANCELLED)]
    kept = [
        make_run(agent, S.SUCCEEDED, age=timedelta(days=29)),
        make_run(agent, S.FAILED, age=timedelta(hours=1)),
        make_run(agent, S.QUEUED, age=old),
        make_run(agent, S.RUNNING, age=old),
        make_run(agent, S.AWAITING_APPROVAL, age=old),
        # A recent rerun of a run that will be deleted: it stays, its link is cleared.
        make_run(agent, S.SUCCEEDED, rerun_of=doomed[0]),
    ]
    return doomed, kept


def test_prune_deletes_old_finished_runs_with_their_rows_and_keeps_recent_and_active_ones(population):
    doomed, kept = population
    doomed_ids = [r.pk for r in doomed]
    kept_ids = [r.pk for r in kept]

    assert runs_prune(days=30) == 3

    assert not Run.objects.filter(pk__in=doomed_ids).exists()
    assert children_of(doomed_ids) == {"steps": 0, "calls": 0, "approvals": 0, "events": 0}
    assert sorted(Run.objects.values_list("pk", flat=True)) == sorted(kept_ids)
    assert children_of(kept_ids) == {"steps": 6, "calls": 6, "approvals": 6, "events": 6}
    assert Run.objects.get(pk=kept[-1].pk).rerun_of is None
    assert runs_prune(days=30) == 0, "a second prune finds nothing more"


def test_prune_archives_one_json_line_per_deleted_run(population, tmp_path):
    doomed, _ = population
    archive = tmp_path / "archive"

    assert runs_prune(days=30, archive_dir=str(archive), batch=2) == 3

    (path,) = archive.glob("*.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    records = [json.loads(line) for line in lines]
    assert sorted(r["run_id"] for r in records) == sorted(r.pk for r in doomed)
    by_id = {r["run_id"]: r for r in records}
    for run in doomed:
        record = by_id[run.pk]
        assert record["status"] == run.status and record["task"] == run.task
        (step,) = record["steps"]
        assert [c["id"] for c in step["calls"]] == [f"c{run.pk}"]


def test_prune_in_batches_deletes_every_old_run(agent):
    for _ in range(5):
        make_run(agent, S.SUCCEEDED, age=timedelta(days=10), children=False)
    assert runs_prune(days=7, batch=2) == 5
    assert not Run.objects.exists()


def test_prune_runs_command_does_the_same(population, tmp_path):
    doomed, kept = population
    out = StringIO()
    call_command("prune_runs", "--days", "30", "--archive-dir", str(tmp_path), stdout=out)
    assert out.getvalue().strip() == "deleted 3 runs older than 30 days"
    assert sorted(Run.objects.values_list("pk", flat=True)) == sorted(r.pk for r in kept)
    (path,) = tmp_path.glob("*.jsonl")
    assert len(path.read_text().splitlines()) == 3


@pytest.mark.parametrize("days", ["0", "-3"])
def test_prune_runs_command_rejects_days_below_one(population, days):
    with pytest.raises(CommandError, match="--days must be at least 1") as error:
        call_command("prune_runs", "--days", days, stdout=StringIO())
    assert error.value.returncode == 2
    assert Run.objects.count() == 9, "nothing was deleted"


# --- pruning keeps the decisions ---------------------------------------------------------------


def test_prune_archives_every_decision_of_the_runs_it_deletes(agent):
    Tool.objects.create(name="send_secret", sensitive_fields=["password"])
    doomed = [make_run(agent, S.SUCCEEDED, age=timedelta(days=40)) for _ in range(3)]
    kept = make_run(agent, S.SUCCEEDED, age=timedelta(days=1))
    first = Approval.objects.get(run=doomed[0])
    ToolCall.objects.filter(pk=first.tool_call_id).update(
        tool_name="send_secret", arguments='{"to": "ops", "password": "hunter2"}'
    )
    # An earlier decision of the same call (asked again after a crash) is kept too.
    Approval.objects.create(
        tool_call_id=first.tool_call_id, run=doomed[0], status=Approval.Status.REJECTED, reason="not yet",
        decided_by_name="bob", decided_at=timezone.now(),
    )
    Approval.objects.filter(pk=first.pk).update(decided_by_name="alice", reason="checked", decided_at=timezone.now())
    expected = sorted(Approval.objects.filter(run__in=doomed).values_list("pk", flat=True))

    assert runs_prune(days=30, batch=2) == 3

    assert not Approval.objects.filter(pk__in=expected).exists()
    assert sorted(ArchivedApproval.objects.values_list("approval_id", flat=True)) == expected
    archived = ArchivedApproval.objects.get(approval_id=first.pk)
    assert (archived.run_id, archived.agent_name, archived.run_task, archived.tool_name) == (
        doomed[0].pk, agent.name, doomed[0].task, "send_secret"
    )
    assert (archived.status, archived.reason, archived.decided_by_name) == (Approval.Status.APPROVED, "checked", "alice")
    assert json.loads(archived.arguments) == {"to": "ops", "password": "••••"}, "secrets are not archived"
    assert ArchivedApproval.objects.filter(run_id=doomed[0].pk, decided_by_name="bob", reason="not yet").exists()
    assert Approval.objects.filter(run=kept).count() == 1 and not ArchivedApproval.objects.filter(run_id=kept.pk).exists()


def test_prune_deletes_nothing_whose_decisions_could_not_be_archived(agent, monkeypatch):
    doomed = [make_run(agent, S.SUCCEEDED, age=timedelta(days=40)) for _ in range(2)]

    def broken(*args, **kwargs):
        raise RuntimeError("archive unavailable")

    monkeypatch.setattr(ArchivedApproval.objects, "bulk_create", broken)
    with pytest.raises(RuntimeError, match="archive unavailable"):
        runs_prune(days=30)

    assert Run.objects.filter(pk__in=[r.pk for r in doomed]).count() == 2
    assert children_of([r.pk for r in doomed])["approvals"] == 2


# --- runs_sweep ----------------------------------------------------------------------------------


@pytest.fixture
def dispatched(monkeypatch):
    """The run ids the sweep hands to the workers (recorded instead of sent)."""
    sent: list[int] = []

    def record(*, run_id):
        sent.append(run_id)

    monkeypatch.setattr(housekeeping, "run_dispatch", record)
    monkeypatch.setattr(decide, "run_dispatch", record)
    return sent


def test_sweep_hands_out_stranded_runs_and_leaves_driven_and_finished_ones(agent, dispatched, settings):
    settings.RUN_REQUEUE_AFTER_SECONDS = 60
    now = timezone.now()
    past, future = now - timedelta(seconds=5), now + timedelta(seconds=60)
    stranded = [
        make_run(agent, S.RUNNING, lease_owner="dead", lease_expires_at=past, children=False),
        make_run(agent, S.RUNNING, children=False),  # running with no lease at all
        make_run(agent, S.QUEUED, age=timedelta(seconds=120), children=False),  # its message was lost
    ]
    left = [
        make_run(agent, S.RUNNING, lease_owner="alive", lease_expires_at=future, children=False),
        make_run(agent, S.QUEUED, age=timedelta(seconds=5), children=False),  # its message is on its way
        make_run(agent, S.AWAITING_APPROVAL, age=timedelta(days=1)),  # waits for a pending decision
        make_run(agent, S.SUCCEEDED, lease_owner="", age=timedelta(days=1), children=False),
        make_run(agent, S.FAILED, lease_owner="dead", lease_expires_at=past, children=False),
    ]
    Approval.objects.filter(run=left[2]).update(status=Approval.Status.PENDING)

    result = runs_sweep()

    assert sorted(result["redispatched"]) == sorted(r.pk for r in stranded)
    assert sorted(dispatched) == sorted(r.pk for r in stranded)
    assert result["approvals_expired"] == 0
    assert not set(dispatched) & {r.pk for r in left}


def test_sweep_expires_overdue_approvals_and_resumes_their_run(agent, dispatched):
    parked = make_run(agent, S.AWAITING_APPROVAL)
    Approval.objects.filter(run=parked).update(
        status=Approval.Status.PENDING, expires_at=timezone.now() - timedelta(seconds=1)
    )
    waiting = make_run(agent, S.AWAITING_APPROVAL)
    Approval.objects.filter(run=waiting).update(
        status=Approval.Status.PENDING, expires_at=timezone.now() + timedelta(hours=1)
    )

    result = runs_sweep()

    assert result["approvals_expired"] == 1
    assert dispatched == [parked.pk]
    assert Approval.objects.get(run=parked).status == Approval.Status.EXPIRED
    assert Approval.objects.get(run=waiting).status == Approval.Status.PENDING


def test_sweep_hands_out_a_queued_run_whose_worker_died_right_after_claiming_it(agent, dispatched, settings):
    # lease_claim takes a queued run; the worker dies before its first commit sets `running`.
    settings.RUN_REQUEUE_AFTER_SECONDS = 60
    run = make_run(
        agent,
        S.QUEUED,
        age=timedelta(seconds=600),
        lease_owner="a-worker-that-died",
        lease_expires_at=timezone.now() - timedelta(seconds=300),
        children=False,
    )
    assert run.pk in runs_sweep()["redispatched"], "a queued run with an expired lease is stranded for good"


def test_sweep_resumes_a_parked_run_whose_resume_was_lost(agent, dispatched, settings):
    # Every approval of the run is decided, but the message that resumes it never reached a
    # worker (Redis was down when the operator decided): nothing else will ever resume it.
    settings.RUN_REQUEUE_AFTER_SECONDS = 60
    run = make_run(agent, S.AWAITING_APPROVAL, age=timedelta(hours=1))
    Approval.objects.filter(run=run).update(
        status=Approval.Status.APPROVED, decided_at=timezone.now() - timedelta(seconds=600)
    )
    assert run.pk in runs_sweep()["redispatched"], "a parked run with no pending approval is never resumed"


def test_a_queued_run_whose_message_was_lost_is_sent_again_within_the_default_time_after_its_last_dispatch(
    agent, monkeypatch, settings, django_capture_on_commit_callbacks
):
    # Redis restarted empty: the run's message is gone. A second delivery is harmless (the lease
    # claim), so the sweep re-sends a queued run soon after its last dispatch, as soon as it would
    # hand out the run of a worker that died (lease + sweep interval), not a minute after its creation.
    sent = []
    monkeypatch.setattr(dispatch, "_send", sent.append)
    requeue = settings.RUN_REQUEUE_AFTER_SECONDS  # the default
    assert requeue + settings.SWEEP_INTERVAL_SECONDS <= settings.RUN_LEASE_SECONDS + settings.SWEEP_INTERVAL_SECONDS
    now = timezone.now()
    lost = make_run(agent, S.QUEUED, age=timedelta(seconds=requeue + 1), children=False)
    resumed = make_run(agent, S.QUEUED, age=timedelta(hours=2), children=False)  # e.g. resumed just now
    Run.objects.filter(pk=lost.pk).update(dispatched_at=now - timedelta(seconds=requeue + 1))
    Run.objects.filter(pk=resumed.pk).update(dispatched_at=now - timedelta(seconds=1))

    with django_capture_on_commit_callbacks(execute=True):
        assert runs_sweep()["redispatched"] == [lost.pk]
    assert sent == [lost.pk]
    assert Run.objects.get(pk=lost.pk).dispatched_at >= now, "the time is measured from the last dispatch"
    with django_capture_on_commit_callbacks(execute=True):
        assert runs_sweep()["redispatched"] == [], "sent once per RUN_REQUEUE_AFTER_SECONDS, not at every sweep"

"""A run stopped with a summary reads as stopping ("Stopping: writing a summary") on its page, in
the API and in its timeline's events until the summary is recorded; only then does it read as
ended, with the summary as its answer. The model takes 3 s (the window in which the test looks)."""
from django.urls import reverse

from runs.controls.levers import run_stop
from runs.models import Run, RunEvent
from tests.conftest import wait_until
from tests.controls.test_levers import alice, drive, finish, gate, new_run  # noqa: F401 (fixtures)
from tests.engine.loop_contract.support import call, calls
from tests.web.api.test_api import api

SUMMARY = "The gate ran once; nothing is left undone."


def test_a_stopped_run_reads_as_stopping_until_its_summary_is_recorded(script, gate, alice, client):  # noqa: F811
    model = script(calls(call("gate", {"n": 1}, "g1")), {"content": SUMMARY}, latency=3.0)
    run = new_run(model)
    reader = api(alice)
    client.force_login(alice)
    driver = drive(run.pk)
    gate.next_call()
    run_stop(run_id=run.pk, user=alice)
    gate.release.release()
    # The run's row is closed (its stop reason is set) while the summary request is under way.
    wait_until(lambda: Run.objects.filter(pk=run.pk).exclude(stop_reason="").exists(), interval=0.02,
               message="the run's close")
    during = reader.get(f"/api/v1/runs/{run.pk}/").json()
    [listed] = [r for r in reader.get("/api/v1/runs/").json()["results"] if r["run_id"] == run.pk]
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    page_before_summary = not Run.objects.filter(pk=run.pk, answer=SUMMARY).exists()
    finish(driver)

    assert during["answer"] == "" and page_before_summary, "the summary came before the test looked: model too fast"
    assert (during["status"], during["finished_at"], during["answer"]) == ("stopping", None, "")
    assert listed["status"] == "stopping"
    assert 'data-status="stopping"' in page and "Stopping: writing a summary" in page
    after = reader.get(f"/api/v1/runs/{run.pk}/").json()
    assert (after["status"], after["stop_reason"], after["answer"]) == ("cancelled", "operator_stop", SUMMARY)
    assert after["finished_at"] is not None
    # The timeline (what the page's socket streams): stopping, then ended with the summary.
    statuses = [e["status"] for e in RunEvent.objects.filter(run=run, kind="run").order_by("seq").values_list("data", flat=True)]
    assert statuses[-2:] == ["stopping", "cancelled"]


def test_a_summary_the_model_cannot_write_still_ends_the_run(script, gate, alice):  # noqa: F811
    model = script(calls(call("gate", {"n": 1}, "g1")), {"status": 400, "error": "bad request"})
    run = new_run(model, models=[model])
    driver = drive(run.pk)
    gate.next_call()
    run_stop(run_id=run.pk, user=alice)
    gate.release.release()
    finish(driver)
    after = api(alice).get(f"/api/v1/runs/{run.pk}/").json()
    assert (after["status"], after["stop_reason"]) == ("cancelled", "operator_stop")
    assert after["finished_at"] is not None


def test_a_run_whose_worker_died_writing_its_summary_reads_as_ended_after_the_sweep(demo_data):
    from datetime import timedelta

    from django.utils import timezone

    from runs.lifecycle.housekeeping import runs_sweep
    from runs.lifecycle.runs import run_create
    from runs.models import Agent

    run = run_create(agent=Agent.objects.get(name="demo"), task="anything", overrides={})
    ended = dict(status=Run.Status.CANCELLED, stop_reason=Run.StopReason.OPERATOR_STOP, finished_at=timezone.now(),
                 summary_pending=True, lease_owner="dead-worker")
    Run.objects.filter(pk=run.pk).update(**ended, lease_expires_at=timezone.now() + timedelta(seconds=60))
    runs_sweep()
    assert Run.objects.get(pk=run.pk).shown_status == "stopping"  # its worker may still be asking

    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    runs_sweep()
    assert Run.objects.get(pk=run.pk).shown_status == Run.Status.CANCELLED
    last = RunEvent.objects.filter(run=run, kind="run").order_by("-seq").first()
    assert (last.data["status"], last.data["finished_at"] is not None) == ("cancelled", True)

"""A final answer checked against the system's real state."""

from runs.models import Run
from tests.engine.loop_contract.support import make_agent
from toolsapp.models import Ticket

# --- 12. verification -------------------------------------------------------------------------------


def test_failed_verification_is_sent_back_once_then_ends_the_run(launch, script):
    make_agent("verified", verifier="ticket_exists")
    model = script({"content": "All done."}, {"content": "Still done."}, {"content": "never asked"})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.VERIFICATION_FAILED
    assert "ticket number" in run.stop_detail
    requests = script.requests(model)
    assert len(requests) == 2
    feedback = requests[1]["messages"][-1]
    assert feedback["role"] == "user"
    assert feedback["content"].startswith("Verification failed: ")
    assert "ticket number" in feedback["content"]
    assert not any(m["content"].startswith("Verification failed") for m in requests[0]["messages"] if m["role"] == "user")


def test_answer_passing_verification_after_feedback_ends_as_final_answer(launch, script):
    make_agent("verified", verifier="ticket_exists")
    ticket = Ticket.objects.create(title="[TEST] x", body="b", priority="low")
    model = script({"content": "All done."}, {"content": f"Created ticket #{ticket.pk}."})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.status == Run.Status.SUCCEEDED
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert run.answer == f"Created ticket #{ticket.pk}."


def test_answer_passing_verification_first_time_ends_as_final_answer(launch, script):
    make_agent("verified", verifier="ticket_exists")
    ticket = Ticket.objects.create(title="[TEST] y", body="b", priority="low")
    model = script({"content": f"Ticket #{ticket.pk} is ready."})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert len(script.requests(model)) == 1


def test_answer_naming_a_missing_ticket_fails_verification(launch, script):
    make_agent("verified", verifier="ticket_exists")
    model = script({"content": "Created #999991."}, {"content": "Created #999992."})
    run = launch("make a ticket", agent="verified", models=[model])
    assert run.stop_reason == Run.StopReason.VERIFICATION_FAILED
    assert "#999992" in run.stop_detail

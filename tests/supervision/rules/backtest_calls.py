"""Destructive calls people decided, written as the loop and a decision leave them, with the
evidence their cards showed: the history the backtest replays."""
import json
from datetime import timedelta

from django.utils import timezone

from runs.models import Agent, Approval, CallEvidence, Run, Step, ToolCall

EVIDENCE = {
    "said": "The order is open, so I will cancel it.",
    "read": [{"kind": "tool", "tool": "lookup_order", "step": 1, "call_pk": 1, "outside": False,
              "text": '{"order_id": "ORD-1001", "status": "cancelled"}' + " " * 400 + "END", "chars": 450}],
    "values": [{"path": "$.order_id", "value": "ORD-1001", "source": "tool",
                "words": "from lookup_order's result at step 1", "outside": False}],
}


class Decided:
    """Calls asked about in runs of `agent` (the demo agent), each decided as told."""

    def __init__(self, agent: Agent | None = None, *, customer: str = "ACME"):
        self.n = 0
        self.agent = agent or Agent.objects.get(name="demo")
        self.run = Run.objects.create(agent=self.agent, task="t", customer=customer)

    def add(self, tool: str, arguments, *, decision: str = "rejected", by: str = "rita", automatic: bool = False,
            edited: bool = False, days_ago: float = 0, note: str = "", unseen=(), evidence: dict | None = None,
            outside=(), run: Run | None = None, call: ToolCall | None = None) -> Approval:
        """One call (or, with `call`, the same call asked about again) and its approval, decided
        `decision` ("approved", "rejected", "pending", "expired", "closed") by `by`."""
        run = run or self.run
        if call is None:
            self.n += 1
            step = Step.objects.create(run=run, index=self.n, iteration=self.n, model="m", message={})
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            call = ToolCall.objects.create(
                run=run, step=step, index=0, call_id=f"call-{self.n}", tool_name=tool, arguments=text,
                args_hash=f"{self.n:04d}" + "ab" * 30, idempotency_key=f"key-{self.n}",
            )
        person = decision in ("approved", "rejected") and not automatic
        approval = Approval.objects.create(
            tool_call=call, run=run, note=note, unseen_ids=list(unseen), status=decision, automatic=automatic,
            decided_by_name=by if person else "", reason=f"{by} said no" if decision == "rejected" else "",
            edited_args_hash="cd" * 32 if edited else "", rule_name="auto" if automatic else "",
        )
        when = timezone.now() - timedelta(days=days_ago)
        Approval.objects.filter(pk=approval.pk).update(
            requested_at=when, decided_at=when + timedelta(seconds=30) if decision != "pending" else None
        )
        ToolCall.objects.filter(pk=call.pk).update(approval=approval)
        CallEvidence.objects.create(
            approval=approval, project_id=run.agent.project_id, tool_name=tool, data=evidence or EVIDENCE,
            outside_paths=list(outside),
        )
        approval.refresh_from_db()
        return approval

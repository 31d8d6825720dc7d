"""What a person deciding a call is shown besides the call itself, computed once when the call
reaches the queue (runs/supervision/evidence/sources.py) so the queue stays fast, and what the product
records about how people decide (runs/supervision/quality/: nudges.py, report.py)."""
from django.conf import settings
from django.db import models

from runs.models.core import Approval


class CallEvidence(models.Model):
    """The evidence of one approval: what the model had just read, where each argument value came
    from, the tool's state check, and the key its twins share. One row per approval, written in
    the transaction that asks (rules and grants read it too: a twin that ran stops an automatic
    approval)."""

    approval = models.OneToOneField(Approval, on_delete=models.CASCADE, primary_key=True, related_name="evidence")
    # Kept here so twins and backtests filter without joins; the run's project when asked.
    project_id = models.BigIntegerField(null=True, blank=True)
    tool_name = models.CharField(max_length=200)
    # Keyed hash of the tool's name and its identifying arguments (Tool.identifier_fields, else
    # all): equal for twins. "" when the arguments could not be read.
    identity = models.CharField(max_length=64, blank=True)
    # {"said": the model's words before the call, "read": [what it had just read, newest first],
    #  "values": [where each argument value came from]}: runs/supervision/evidence/sources.py documents the
    #  shape.
    data = models.JSONField(default=dict, blank=True)
    outside_paths = models.JSONField(default=list, blank=True, help_text="Argument paths whose value came from outside content.")
    # The tool's state check ("check" is taken by Django's Model.check): {"tool", "ok", "answer"
    # or "error", "summary"}; state_checked_at: when it answered.
    state = models.JSONField(default=dict, blank=True)
    state_checked_at = models.DateTimeField(null=True, blank=True)
    state_requested_at = models.DateTimeField(null=True, blank=True, help_text="A check asked for and not yet answered.")
    shown_at = models.DateTimeField(null=True, blank=True, help_text="When a person was first shown the card.")
    # At the decision: the twins the decider was shown ([{"approval", "run", "state"}]).
    twins_at_decision = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["identity", "created_at"], name="evidence_twins")]

    def __str__(self):
        return f"evidence of approval {self.approval_id}"


class NudgeShown(models.Model):
    """A card that asked its person for a reason before Approve, after a streak of quick approvals."""

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="nudges")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    user_name = models.CharField(max_length=150)
    project_id = models.BigIntegerField(null=True, blank=True)
    streak = models.PositiveSmallIntegerField(help_text="The quick approvals in a row before it.")
    shown_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-shown_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["approval", "user_name"], name="one_nudge_per_card_and_person")]

    def __str__(self):
        return f"nudge to {self.user_name} on approval {self.approval_id}"

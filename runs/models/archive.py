from django.db import models


class ArchivedApproval(models.Model):
    """A decision of a pruned run, kept after the run, its steps and its calls are deleted.

    Decisions are the audit record of who let what happen: pruning copies each one here first.
    Plain columns, so nothing deleted later can blank them; the one foreign key, its project, is
    protected. The project is copied from the run, not found again by the agent's name: a name
    can be given up and taken by another project's agent.
    """

    approval_id = models.BigIntegerField(unique=True)
    run_id = models.BigIntegerField(db_index=True)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, null=True, related_name="+",
        help_text="The project of the run when it was archived: only its people see the decision.",
    )
    agent_name = models.CharField(max_length=100, blank=True)
    customer = models.CharField(max_length=200, blank=True)
    run_task = models.TextField(blank=True)
    tool_name = models.CharField(max_length=200)
    call_id = models.TextField(blank=True)
    arguments = models.TextField(blank=True)
    args_hash = models.CharField(max_length=64, blank=True)
    call_status = models.CharField(max_length=20, blank=True)
    status = models.CharField(max_length=10)
    note = models.TextField(blank=True)
    reason = models.TextField(blank=True)
    automatic = models.BooleanField(default=False)
    decided_by_name = models.CharField(max_length=150, blank=True)
    # Who or what decided beyond one person: the rule (as it was), everyone who approved a
    # two-person call, and an operator's edit (masked like the arguments) with its hash.
    rule_name = models.CharField(max_length=200, blank=True)
    rule_version = models.PositiveIntegerField(null=True, blank=True)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    voters = models.JSONField(default=list, blank=True)
    edited_arguments = models.TextField(blank=True)
    edited_args_hash = models.CharField(max_length=64, blank=True)
    guidance = models.TextField(blank=True)
    requested_at = models.DateTimeField(null=True)
    decided_at = models.DateTimeField(null=True)
    archived_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["requested_at", "approval_id"]

    def __str__(self):
        return f"Archived approval {self.approval_id} of run {self.run_id}"

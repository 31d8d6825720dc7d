"""What lets a few people supervise many runs: approval rules (with their versions, the audit
trail of rule changes), the votes of a two-person decision, and grants given for one run."""
from django.conf import settings
from django.db import models

from projects.models import InProject
from runs.models.core import Agent, Approval, Run


class ApprovalRule(InProject, models.Model):
    """Decides a destructive call before a person sees it. Rules are tried in `position` order
    (then by id); the first that matches decides; no match means ask one person.

    A rule never widens what the loop allows: it is consulted only for calls that passed the
    schema and the agent's tool list, and the tool still checks ownership when it runs."""

    class Action(models.TextChoices):
        APPROVE = "approve", "Approve automatically"
        REJECT = "reject", "Reject automatically"
        ASK = "ask", "Ask one person"
        ASK_TWO = "ask_two", "Ask two people"
        ASK_GROUP = "ask_group", "Ask a named group"
        ASK_QUORUM = "ask_quorum", "Ask several people (a quorum)"

    name = models.CharField(max_length=200)
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+",
        help_text="It decides calls of this project's runs only.",
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="approval_rules",
        help_text="Only runs of this agent; empty: every agent.",
    )
    position = models.IntegerField(default=100, help_text="Lower is tried first.")
    enabled = models.BooleanField(default=True)
    shadow = models.BooleanField(
        default=False, verbose_name="In shadow",
        help_text="Tried on every live destructive call, and what it would have decided is recorded, "
        "but people decide as if it did not exist.",
    )
    tool_pattern = models.CharField(
        max_length=200, default="*", help_text="Tool name, or a pattern with * and ? (refund_*)."
    )
    conditions = models.JSONField(
        default=list, blank=True,
        help_text='All must hold: [{"path": "$.amount", "op": "lt", "value": 50}]. '
        "Operators: eq, ne, lt, gt, in, fullmatch (the whole value, RE2), matches (contains a match, RE2), "
        "present, absent.",
    )
    customer = models.CharField(max_length=100, blank=True, help_text="Only runs for this customer; empty: any.")
    # An account, not a name: a person who later takes a name a rule targets is not who it meant.
    # PROTECT: a deleted account must not turn "launched by ada" into "launched by anyone".
    launched_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Only runs this account launched; empty: any.",
    )
    launched_by_unresolved = models.CharField(
        max_length=150, blank=True, editable=False,
        help_text="A launcher name from before rules named accounts, which matched no account: "
        "the rule matches no run until an account (or anyone) is chosen.",
    )
    action = models.CharField(max_length=16, choices=Action.choices, default=Action.ASK)
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Ask a named group: only its members decide.",
    )
    approvals_needed = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="With 'Ask several people': how many different people must approve (2 to 10).",
    )
    quorum_groups = models.ManyToManyField(
        "auth.Group", through="RuleQuorumGroup", blank=True, related_name="+",
        help_text="With 'Ask several people': each of these groups must give at least one of the approvals, "
        "each from a different person.",
    )
    reason = models.TextField(blank=True, help_text="Reject: the reason the model is told.")
    escalate_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Escalate calls it sends to people after this long; empty: the agent's."
    )
    expiry_warning_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Calls it sends to people warn this long before they expire; empty: the agent's."
    )
    version = models.PositiveIntegerField(default=1, editable=False)
    updated_by_name = models.CharField(max_length=150, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "pk"]

    def __str__(self):
        return f"{self.name} v{self.version}"


class RuleQuorumGroup(models.Model):
    """A group a quorum rule needs an approval from. PROTECT, as the rule's own group: a deleted
    group must not turn "one from Finance" into "anyone"."""

    rule = models.ForeignKey(ApprovalRule, on_delete=models.CASCADE, related_name="+")
    group = models.ForeignKey("auth.Group", on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "group"], name="unique_rule_quorum_group")]


class ApprovalRuleVersion(models.Model):
    """Every saved state of a rule, and its deletion: the audit trail of rule changes."""

    class Change(models.TextChoices):
        CREATED = "created", "Created"
        UPDATED = "updated", "Updated"
        DELETED = "deleted", "Deleted"

    rule = models.ForeignKey(ApprovalRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="versions")
    rule_key = models.BigIntegerField(db_index=True, help_text="The rule's id, kept after it is deleted.")
    version = models.PositiveIntegerField()
    change = models.CharField(max_length=10, choices=Change.choices)
    snapshot = models.JSONField(default=dict)
    changed_by_name = models.CharField(max_length=150, blank=True)
    changed_at = models.DateTimeField(auto_now_add=True)
    # Saved although its backtest said it would have approved calls people rejected: those calls
    # ([{"approval": id, "run": id, "tool": name, "person": decision}]), as the saver confirmed them.
    saved_over = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-changed_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["rule_key", "version"], name="unique_rule_version")]

    def __str__(self):
        return f"rule {self.rule_key} v{self.version} {self.change}"


class ShadowDecision(models.Model):
    """What a rule in shadow would have decided about one live destructive call, recorded when the
    call was asked about; the call's own approval says what really happened. Kept by rule_key and
    name, like decisions, so the record outlives an edit or a deletion of the rule."""

    class Outcome(models.TextChoices):
        APPROVE = "approve", "Approve automatically"
        REJECT = "reject", "Reject automatically"
        BLOCKED = "blocked", "Approve, but a safeguard sends it to a person"
        ASK = "ask", "Ask people"

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="shadow_decisions")
    # No foreign key to the rule: a rule deleted while the call was asked about must not fail the
    # loop's commit (the acting rule is held for that; a rule in shadow is not worth a lock).
    rule_key = models.BigIntegerField(help_text="The rule's id, kept after it is deleted.")
    rule_version = models.PositiveIntegerField()
    rule_name = models.CharField(max_length=200)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    detail = models.TextField(blank=True, help_text="Its words: the reason it would give, or who it would ask.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["rule_key", "-created_at"], name="shadow_by_rule")]
        constraints = [models.UniqueConstraint(fields=["approval", "rule_key"], name="one_shadow_per_rule_and_call")]

    def __str__(self):
        return f"rule {self.rule_key} v{self.rule_version} would {self.outcome} approval {self.approval_id}"


class ApprovalVote(models.Model):
    """One person's approval of a call that needs several, for one version of its arguments: each
    person counts once among the votes that count. An edit voids the votes before it (they were
    for other arguments): they stay, as the record, with `superseded_at` set."""

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    user_name = models.CharField(max_length=150)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    args_hash = models.CharField(max_length=64, blank=True, help_text="The arguments approved (the model's or an edit).")
    superseded_at = models.DateTimeField(null=True, blank=True, help_text="When an edit made this vote stop counting.")

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "user_name"], condition=models.Q(superseded_at__isnull=True),
                name="one_counting_vote_per_person",
            )
        ]

    def __str__(self):
        return f"{self.user_name} approves {self.approval_id}"


class RunGrant(models.Model):
    """A person's standing approval for the rest of one run: of identical calls (same tool and
    arguments hash) or of every call of one tool. Revocable; never covers a call whose outcome
    is unknown, a tool marked always-ask or critical, or (tool grants) an unseen identifier."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="grants")
    tool_name = models.CharField(max_length=200)
    args_hash = models.CharField(max_length=64, blank=True, help_text="Empty: any arguments of this tool.")
    source_approval = models.ForeignKey(Approval, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    granted_by_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by_name = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["run", "tool_name"])]

    def __str__(self):
        scope = f"identical {self.tool_name} calls" if self.args_hash else f"every {self.tool_name} call"
        return f"{scope} in run {self.run_id}"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

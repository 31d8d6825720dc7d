from django.conf import settings
from django.db import models

from projects.models import InProject
from runs.models import deciders


class ToolChoice(models.TextChoices):
    AUTO = "auto", "auto"
    REQUIRED = "required", "required"
    NONE = "none", "none"


class Agent(InProject, models.Model):
    """A saved configuration: prompt, models, tools and the limits every run of it obeys."""

    name = models.CharField(max_length=100, unique=True)
    project = models.ForeignKey("projects.Project", on_delete=models.PROTECT, related_name="+",
                                help_text="The team whose agent it is: its runs, approvals and figures are that project's.")
    description = models.TextField(blank=True)
    system_prompt = models.TextField(default="You are a careful assistant. Use the tools when they help.")
    model_list = models.JSONField(default=list, blank=True, help_text="Ordered model names; empty uses LLM_MODELS.")
    base_url = models.URLField(blank=True, help_text="OpenAI-compatible endpoint; empty uses LLM_BASE_URL.")
    tools = models.ManyToManyField("toolsapp.Tool", blank=True, related_name="agents")
    max_iterations = models.PositiveIntegerField(default=10)
    repeat_limit = models.PositiveIntegerField(default=3)
    max_wall_seconds = models.FloatField(default=600.0)
    max_tokens = models.PositiveIntegerField(default=200_000, help_text="Token budget for the whole run.")
    max_cost_usd = models.FloatField(default=1.0)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="Per model call.")
    context_budget_tokens = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Tokens one request may carry; empty: the models' context window less the answer's cap and 5 %.",
    )
    compact_context = models.BooleanField(
        default=True,
        help_text="When a request would pass the context budget, summarise older tool results in it (the run's "
        "journal keeps them whole, and the model can read one again); off: always send everything.",
    )
    first_tool_choice = models.CharField(max_length=16, choices=ToolChoice.choices, default=ToolChoice.AUTO)
    later_tool_choice = models.CharField(max_length=16, choices=ToolChoice.choices, default=ToolChoice.AUTO)
    parallel_tool_calls = models.BooleanField(default=True)
    stream_answers = models.BooleanField(
        default=True,
        help_text="Ask for streamed answers, so the run page shows each answer as the model writes it; "
        "off: one plain request per answer (the answers are the same either way).",
    )
    provider_options = models.JSONField(default=dict, blank=True,
                                        help_text="Passed through to the API, e.g. OpenRouter's models/provider.")
    verifier = models.CharField(max_length=100, blank=True, help_text="Registered verifier run on the final answer.")
    summarize_on_stop = models.BooleanField(
        default=False, help_text="When a limit stops the run, make one last tools-free call for a summary."
    )
    approval_timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    escalate_after_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Notify the escalation target when an approval waits longer; empty: never."
    )
    expiry_warning_seconds = models.PositiveIntegerField(
        null=True, blank=True, verbose_name="Warn before expiry (seconds)",
        help_text="Warn people (webhook, e-mail, the queue's badge) this long before a waiting call expires; "
        "empty: when a fifth of the approval timeout is left.",
    )
    escalation_emails = models.TextField(
        blank=True, help_text="Who is e-mailed on escalation (comma separated); empty uses APPROVAL_ESCALATION_EMAILS."
    )
    daily_token_alert = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Notify when this agent's runs use more tokens in a day (UTC)."
    )
    daily_cost_alert_usd = models.FloatField(
        null=True, blank=True, help_text="Notify when this agent's runs cost more in a day (UTC)."
    )
    version = models.PositiveIntegerField(default=0, editable=False,
                                          help_text="The current version's number (AgentVersion); runs record it.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


WORK_NAMES = ("models_used", "tools_used")  # Run's columns only the database writes


class ProductionRuns(models.Manager):
    """Runs that are not experiments (which touch nothing real): what metrics, budgets and alerts count."""

    def get_queryset(self):
        return super().get_queryset().filter(experiment=False)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        PAUSED = "paused", "Paused"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class StopReason(models.TextChoices):
        FINAL_ANSWER = "final_answer", "Final answer"
        ITERATION_LIMIT = "iteration_limit", "Iteration limit"
        REPEATED_CALL = "repeated_call", "Repeated call"
        MODEL_ERROR = "model_error", "Model error"
        MAX_TOKENS = "max_tokens", "Output cut at max tokens"
        CONTENT_FILTER = "content_filter", "Refused or filtered"
        TIME_BUDGET = "time_budget", "Time budget"
        TOKEN_BUDGET = "token_budget", "Token budget"
        COST_BUDGET = "cost_budget", "Cost budget"
        VERIFICATION_FAILED = "verification_failed", "Verification failed"
        CANCELLED = "cancelled", "Cancelled"
        OPERATOR_STOP = "operator_stop", "Stopped by an operator"
        WORKER_LOST = "worker_lost", "Worker lost"
        INTERNAL_ERROR = "internal_error", "Internal error"
        CONTEXT_FULL = "context_full", "Conversation too long for the model"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.AWAITING_APPROVAL, Status.PAUSED)
    FINISHED_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    # How an ended run whose summary is still being written reads (page, API, timeline): not yet
    # ended. Derived from summary_pending, never stored as a status (the row is ended for the rest).
    STOPPING = "stopping"
    STOPPING_LABEL = "Stopping: writing a summary"

    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    task = models.TextField()
    customer = models.CharField(max_length=100, blank=True, help_text="Whose data the tools may touch.")
    config = models.JSONField(default=dict, help_text="The agent's settings with overrides, frozen at launch.")
    overrides = models.JSONField(default=dict, blank=True)
    rerun_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns")
    # A fork starts from a copy of its parent's conversation up to and including one step.
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    forked_at_step = models.PositiveIntegerField(null=True, blank=True, help_text="The parent's step index.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    agent_version = models.PositiveIntegerField(null=True, blank=True, help_text="The agent's version it ran with.")
    # A case of an experiment (the evals app): its destructive and non-idempotent calls are
    # simulated (config["experiment"] says how), and it is kept out of the queue, the default
    # history, metrics, budgets and alerts.
    experiment = models.BooleanField(default=False, help_text="A case of an experiment: nothing real is changed.")

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    stop_reason = models.CharField(max_length=24, choices=StopReason.choices, blank=True)
    stop_detail = models.TextField(blank=True, help_text="Why the run ended, in plain words.")
    answer = models.TextField(blank=True)

    iterations = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    # Parts of tokens_in and tokens_out, as the providers report them (priced at their own rates).
    tokens_cached = models.PositiveIntegerField(default=0, help_text="Input tokens read from the provider's cache.")
    tokens_reasoning = models.PositiveIntegerField(default=0, help_text="Output tokens spent on reasoning.")
    compactions = models.PositiveIntegerField(
        default=0, help_text="Requests that summarised tool results no earlier request had summarised."
    )
    # A fork's counters start with its parent's at the fork point (its copied steps); what it did
    # itself is the difference (runs/observability/metrics/own_work.py). Zero for a run that is no fork.
    inherited_iterations = models.PositiveIntegerField(default=0)
    inherited_tokens_in = models.PositiveIntegerField(default=0)
    inherited_tokens_out = models.PositiveIntegerField(default=0)
    inherited_cost_usd = models.FloatField(default=0.0)
    active_seconds = models.FloatField(default=0.0, help_text="Time spent running, not waiting for people.")
    verification_attempts = models.PositiveSmallIntegerField(default=0)
    pending_messages = models.JSONField(default=list, blank=True, help_text="Sent before the next model call.")

    cancel_requested = models.BooleanField(default=False)
    # Operators' levers, applied by the driver at the next iteration boundary: pause (the run
    # then holds no worker until resumed) and stop with a summary.
    pause_requested = models.BooleanField(default=False)
    paused_by_name = models.CharField(max_length=150, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    stop_requested_by_name = models.CharField(
        max_length=150, blank=True, help_text="Set when an operator asked to stop with a summary."
    )
    summary_pending = models.BooleanField(
        default=False, help_text="Ended, and its summary is being asked for: it reads as stopping until it is recorded."
    )
    lease_owner = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    takeovers = models.PositiveIntegerField(default=0, help_text="Times a worker took over from a dead one.")
    event_seq = models.PositiveIntegerField(default=0)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="When the run was last handed to the workers (the sweep re-sends from then)."
    )

    # The models and tools the run's steps and calls used, each name between newlines ("\ngpt-4o\n"):
    # the history's model and tool filters read them from the run itself, where a late page
    # looked through each run's steps or calls (35,000 index probes for a model's page 500 at a
    # million runs). Kept by the database, never by Django: triggers add a step's model and a
    # call's tool when they are inserted, whoever inserts them (migration 0031), and save()
    # never writes them back (see WORK_NAMES).
    models_used = models.TextField(blank=True, default="", editable=False)
    tools_used = models.TextField(blank=True, default="", editable=False)

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = models.Manager()
    production = ProductionRuns()

    class Meta:
        ordering = ["-pk"]
        permissions = [
            ("cancel_run", "Can cancel runs"),
            # Given to no role: a superuser grants it to the few who may launch such runs.
            ("approve_all_launch", "Can launch runs that approve destructive calls automatically"),
        ]
        # Each filter's index ends with the history's whole order (newest first, then by id): a
        # late page of a filter, or one past its end, is read from the index alone (PostgreSQL:
        # an index-only scan; without the id it visits every skipped run's row, 0.4 s for a
        # status of 50,000 runs at a million).
        indexes = [
            models.Index(fields=["status", "-created_at", "-id"], name="run_status_created_id"),
            models.Index(fields=["stop_reason", "-created_at", "-id"], name="run_stop_created_id"),
            models.Index(fields=["agent", "-created_at", "-id"], name="run_agent_created_id"),
            # Whether any experiment run exists (the history hides them then), read from a tiny index.
            models.Index(fields=["-id"], condition=models.Q(experiment=True), name="run_experiment_id"),
        ]

    def __str__(self):
        return f"Run {self.pk}"

    def save(self, *args, **kwargs):
        if self.pk is None:
            # A new row has no steps or calls yet (a copy made by setting pk to None neither).
            self.models_used = self.tools_used = ""
        elif not self._state.adding and kwargs.get("update_fields") is None:
            # An instance read before its steps were inserted holds names the triggers have
            # added to since: saving every column would write the old ones back.
            kwargs["update_fields"] = [
                field.name for field in self._meta.concrete_fields if not field.primary_key and field.name not in WORK_NAMES
            ]
        super().save(*args, **kwargs)

    @property
    def group_name(self) -> str:
        return f"run-{self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED_STATUSES

    @property
    def shown_status(self) -> str:
        """The status people and clients see: "stopping" while the summary is written."""
        return self.STOPPING if self.summary_pending else self.status

    def get_shown_status_display(self) -> str:
        return self.STOPPING_LABEL if self.summary_pending else self.get_status_display()

    @property
    def total_tokens(self) -> int:
        return self.tokens_in + self.tokens_out


class Step(models.Model):
    """One model call."""

    class Kind(models.TextChoices):
        TURN = "turn", "Turn"
        SUMMARY = "summary", "Summary"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField(help_text="1-based position among the run's model calls.")
    iteration = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TURN)
    preamble = models.JSONField(default=list, blank=True, help_text="Messages added just before this call.")
    model = models.CharField(max_length=200, help_text="The model that answered.")
    tool_choice = models.CharField(max_length=16, blank=True)
    tool_choice_fallback = models.BooleanField(default=False, help_text='"required" was refused; retried "auto".')
    finish_reason = models.CharField(max_length=32, blank=True)
    message = models.JSONField(help_text="The assistant message as sent back to the model.")
    latency_ms = models.FloatField(default=0.0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    model_errors = models.JSONField(default=list, blank=True, help_text="Models that failed before this answer.")
    reasoning = models.TextField(blank=True, default="", help_text="The model's reasoning, kept apart: never sent back.")
    notes = models.JSONField(default=list, blank=True, help_text="What reading the answer replaced or left out.")
    tokens_cached = models.PositiveIntegerField(default=0, help_text="Of tokens_in, read from the provider's cache.")
    tokens_reasoning = models.PositiveIntegerField(default=0, help_text="Of tokens_out, spent on reasoning.")
    context_tokens = models.PositiveIntegerField(
        default=0, help_text="The request's size as estimated before it was sent (tool definitions included)."
    )
    tool_definition_tokens = models.PositiveIntegerField(default=0, help_text="Estimated, of context_tokens.")
    compacted_calls = models.JSONField(default=list, blank=True,
                                       help_text="Call ids whose result the request carried as a summary.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="unique_step_index")]
        indexes = [models.Index(fields=["model", "run"]), models.Index(fields=["created_at"])]

    def __str__(self):
        return f"Run {self.run_id} step {self.index}"


class ToolCall(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        STARTED = "started", "Started"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Not executed"
        # It may have taken effect or not: the run ended, its worker died or the tool timed out
        # while it was running. Never retried or approved without a person.
        UNKNOWN = "unknown", "Outcome unknown"
        # An experiment's call that would change something: never run, answered from the case's
        # source run when it made the same call, else with "not executed" (`simulation` says which).
        SIMULATED = "simulated", "Simulated (experiment)"

    DONE_STATUSES = (Status.REJECTED, Status.SUCCEEDED, Status.FAILED, Status.SKIPPED, Status.UNKNOWN, Status.SIMULATED)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tool_calls")
    index = models.PositiveIntegerField()
    call_id = models.TextField(help_text="The model's id of the call, as sent (any length).")
    tool_name = models.CharField(max_length=200, db_index=True, help_text="As the model named it, at most 200 characters.")
    arguments = models.TextField(help_text="Arguments exactly as the model sent them.")
    args_hash = models.CharField(max_length=64, db_index=True, help_text="HMAC-SHA256 of canonical arguments.")
    idempotency_key = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True, help_text="The full result, never truncated.")
    result_text = models.TextField(blank=True, help_text="The tool message content as sent to the model.")
    truncated = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set when an operator edited the arguments before approving: what the tool ran with. The
    # model's own `arguments` stay as sent, so its view of the conversation stays true.
    executed_arguments = models.TextField(blank=True, help_text="The arguments an operator approved, when edited.")
    executed_args_hash = models.CharField(max_length=64, blank=True)
    # The decision that counts now. A call asked about again (after a crash) keeps every earlier
    # decision in its `approvals`; this points at the newest.
    approval = models.ForeignKey(
        "Approval", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    # A simulated call: {"answered_from": source run id and call id, or None: "not executed"}.
    simulation = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["step_id", "index"]
        constraints = [models.UniqueConstraint(fields=["step", "index"], name="unique_call_index")]
        indexes = [models.Index(fields=["run", "tool_name", "args_hash"])]

    def __str__(self):
        return f"{self.tool_name} ({self.call_id})"

    @property
    def may_have_taken_effect(self) -> bool:
        """Handed to its tool at some point (marked started, or asked about again after a crash,
        which keeps `started_at`) with no result recorded since: its outcome is unknown."""
        return self.status == self.Status.STARTED or self.started_at is not None

    @property
    def ok(self) -> bool | None:
        if self.status not in self.DONE_STATUSES:
            return None
        if self.status == self.Status.SIMULATED:  # what the model was told (a recorded result, or "not executed")
            return isinstance(self.result, dict) and self.result.get("ok") is True
        return self.status == self.Status.SUCCEEDED


class Approval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        EXPIRED = "expired", "Expired"
        # Nobody decided: the run ended first (an operator's cancel or stop, a limit, a failure).
        CLOSED = "closed", "Closed: the run ended"

    tool_call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="approvals")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    note = models.TextField(blank=True, help_text="Why approval is needed (e.g. interrupted by a crash).")
    requested_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # Kept with the decision, so deleting the user does not blank who decided.
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    automatic = models.BooleanField(default=False, help_text="Decided by a policy, a rule or a grant, not a person.")
    # What decided it, when not a person: a rule (its version then) or a grant of the run.
    rule = models.ForeignKey("ApprovalRule", null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals")
    rule_version = models.PositiveIntegerField(null=True, blank=True)
    rule_name = models.CharField(max_length=200, blank=True, help_text="Kept with the decision: rules change.")
    grant = models.ForeignKey("RunGrant", null=True, blank=True, on_delete=models.SET_NULL, related_name="approvals")
    # Who may decide: how many different people must approve (a rejection by one ends it), and
    # the group they must belong to when a rule names one.
    required_approvals = models.PositiveSmallIntegerField(default=1)
    approvals_given = models.PositiveSmallIntegerField(default=0)
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # A quorum: the groups (ids, as the rule named them when the call was asked about) that must
    # each give one of the approvals, each from a different person.
    quorum_groups = models.JSONField(default=list, blank=True)
    # An approval with edited arguments: what the call runs with instead, and its keyed hash.
    edited_arguments = models.TextField(blank=True)
    edited_args_hash = models.CharField(max_length=64, blank=True)
    guidance = models.TextField(blank=True, help_text="With a rejection: what the model should do instead.")
    unseen_ids = models.JSONField(default=list, blank=True, help_text="Identifiers the run had not seen when asked.")
    escalate_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # When people are warned that it will expire (expires_at less the agent's or rule's warning),
    # and when they were: claimed once by the sweep, like an escalation.
    warn_at = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at", "pk"]
        permissions = [("decide_approval", "Can approve or reject destructive calls")]
        indexes = [models.Index(fields=["status", "requested_at"]), models.Index(fields=["status", "escalate_at"]),
                   models.Index(fields=["status", "warn_at"], name="approval_warn_due"),  # and the audit, newest first:
                   models.Index(fields=["decided_at", "id"], name="approval_decided")]

    def __str__(self):
        return f"Approval of {self.tool_call}"

    # What decided it (runs/models/deciders.py: the one definition, in Python and in SQL).
    decider_kind = staticmethod(deciders.decider_kind)

    @property
    def decider(self) -> str:
        """Who or what decided, in the pages' words ("alice", "rule 'refunds' v3", "expiry"...)."""
        return deciders.decider_words(self)


class RunEvent(models.Model):
    """What the live timeline shows, numbered per run so a client can ask for what it missed."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=32)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_event_seq")]

"""An agent's long-term memory: facts its runs saved (after a person approved each), and which
later runs read them. The full-text index over the facts is the migrations' (see search.py)."""
from django.conf import settings
from django.core.validators import MaxLengthValidator, MinLengthValidator
from django.db import models
from django.db.models import Q

from memory.limits import TEXT_MAX, TEXT_MIN


class Memory(models.Model):
    """One fact, in the scope of an agent and a customer ("" for runs without one)."""

    agent = models.ForeignKey("runs.Agent", on_delete=models.CASCADE, related_name="memories")
    customer = models.CharField(max_length=100, blank=True)
    text = models.TextField(validators=[MinLengthValidator(TEXT_MIN), MaxLengthValidator(TEXT_MAX)])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The call that saved it: a retried call (same key) gets this fact back, never a second one.
    idempotency_key = models.CharField(max_length=64, blank=True, editable=False)
    written_by_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    written_by_call = models.ForeignKey(
        "runs.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Copied when the fact is saved: pruning deletes runs, their steps and their decisions' rows,
    # and the page must still say where a fact came from and who let it in.
    written_in_run = models.BigIntegerField(null=True, blank=True, help_text="The run's number, kept after pruning.")
    written_at_step = models.PositiveIntegerField(null=True, blank=True)
    approved_by_name = models.CharField(
        max_length=200, blank=True, help_text="Who or what approved the save; empty: the tool asked nobody."
    )
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "memories"
        indexes = [models.Index(fields=["agent", "customer", "-created_at"], name="memory_scope_created")]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key"], condition=~Q(idempotency_key=""), name="memory_unique_idempotency_key"
            ),
        ]

    def __str__(self):
        return f"Memory {self.pk} of agent {self.agent_id}"


class MemoryRead(models.Model):
    """A fact one search_memory call returned to a run: one row per fact per call."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="reads")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    # A read-only call runs before its step and call rows are written (they are committed
    # together with its result), so the call is named by its idempotency key (run, step,
    # position); `call` is set when its row already existed.
    call_key = models.CharField(max_length=64, blank=True)
    call = models.ForeignKey("runs.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    read_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-read_at", "-pk"]
        indexes = [models.Index(fields=["memory", "-read_at"], name="memory_read_latest")]

    def __str__(self):
        return f"Memory {self.memory_id} read by run {self.run_id}"

from django.conf import settings
from django.db import models

from projects.models import InProject
from runs.models.core import Agent, Approval


class Webhook(InProject, models.Model):
    """A receiver of the notifications, registered on the settings page (admins); the URLs in
    WEBHOOK_URLS get them too. Removing one keeps its deliveries (they name their URL)."""

    url = models.URLField(max_length=2000, unique=True)
    description = models.CharField(max_length=200, blank=True, help_text="Who receives it, for the people who read this list.")
    project = models.ForeignKey(
        "projects.Project", on_delete=models.PROTECT, related_name="+",
        help_text="It receives this project's notifications only.",
    )
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["url"]

    def __str__(self):
        return self.url


class BudgetAlert(models.Model):
    """An agent crossed its daily token or cost threshold; one row per agent, day and kind."""

    class Kind(models.TextChoices):
        TOKENS = "tokens", "Tokens"
        COST = "cost", "Cost"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="budget_alerts")
    day = models.DateField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    threshold = models.FloatField()
    observed = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["agent", "day", "kind"], name="one_budget_alert_per_day")]

    def __str__(self):
        return f"{self.agent} {self.kind} {self.day}"


class WebhookDelivery(models.Model):
    """An outgoing notification, recorded before it is sent so a lost broker loses nothing.

    The sender marks it delivered; the sweep sends again what is still due.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    url = models.TextField()
    event = models.CharField(max_length=64)
    body = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self):
        return f"{self.event} to {self.url} ({self.status})"


class ChatMessage(models.Model):
    """An approval's message in the chat channel (runs/supervision/chat/clicks.py): posted when the call
    waits, updated with its outcome however it is decided."""

    class Status(models.TextChoices):
        PENDING = "pending", "Not posted yet"
        POSTING = "posting", "Being posted"
        POSTED = "posted", "Posted"
        FAILED = "failed", "Could not be posted"

    approval = models.OneToOneField(Approval, on_delete=models.CASCADE, related_name="chat_message")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    channel = models.CharField(max_length=64, blank=True)
    ts = models.CharField(max_length=64, blank=True, help_text="Slack's id of the message (bot token only).")
    outcome_shown = models.CharField(max_length=300, blank=True, help_text="The outcome the message shows; empty: it asks.")
    attempts = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When a process took it to post it.")
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["status", "outcome_shown"], name="chat_to_sync")]

    def __str__(self):
        return f"chat message of approval {self.approval_id} ({self.status})"

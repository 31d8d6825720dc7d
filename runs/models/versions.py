from django.conf import settings as django_settings
from django.db import models


class AgentVersion(models.Model):
    """Every saved state of an agent (and drafts, saved without becoming current): what each
    change was, who made it, and what runs ran with (Run.agent_version holds the number)."""

    agent = models.ForeignKey("runs.Agent", on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    settings = models.JSONField(help_text="Every setting of the agent at this version, its tools by name.")
    draft = models.BooleanField(default=False, help_text="Saved to be evaluated first: runs do not use it.")
    changed = models.JSONField(default=list, blank=True, help_text="The settings that differ from the version before.")
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_by_name = models.CharField(max_length=150, blank=True, help_text="Kept after the account is deleted.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "-number"]
        constraints = [models.UniqueConstraint(fields=["agent", "number"], name="unique_agent_version")]

    def __str__(self):
        return f"{self.agent_id} v{self.number}" + (" (draft)" if self.draft else "")

"""What operators say to a running agent: notes added to its conversation at the next boundary."""
from django.conf import settings
from django.db import models
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual

from runs.models.core import Run, Step

# An operator's note, wherever it comes from (the message lever, a fork's message): what the
# forms, the API, the websocket and the table itself hold it to.
NOTE_MAX_CHARS = 4000


class OperatorMessage(models.Model):
    """A note an operator typed for a run. It waits here until the driver sends it, as a user
    message before the next model request, and records it with that request's step (`step`), in
    the same commit; a note typed meanwhile stays waiting for the request after."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="operator_messages")
    text = models.TextField(max_length=NOTE_MAX_CHARS)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    author_name = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="operator_messages")

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["run", "step"])]
        constraints = [models.CheckConstraint(
            condition=LessThanOrEqual(Length("text"), NOTE_MAX_CHARS), name="operator_note_at_most_4000_chars",
            violation_error_message=f"A note is at most {NOTE_MAX_CHARS} characters.",
        )]

    def __str__(self):
        return f"note by {self.author_name} for run {self.run_id}"

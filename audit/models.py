"""The audit log of administration: who changed what, when, from where, with the values before
and after (secrets masked). Append-only: an entry is never changed or deleted (the model refuses it
through its manager, the admin shows entries read-only, and the database refuses any UPDATE or DELETE of
an entry, and on PostgreSQL a TRUNCATE, whatever sends it: audit/migrations/0003_append_only_triggers.py)."""
from django.db import models


class AppendOnly(Exception):
    """An audit entry may only be added."""


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnly("audit entries are never changed")

    def delete(self):
        raise AppendOnly("audit entries are never deleted")


class AuditEntry(models.Model):
    class Action(models.TextChoices):
        CREATED = "created", "Created"
        UPDATED = "updated", "Changed"
        DELETED = "deleted", "Deleted"
        SIGNED_IN = "signed_in", "Signed in"
        SIGN_IN_FAILED = "sign_in_failed", "Sign-in failed"
        TOKEN_NEW_ADDRESS = "token_new_address", "Token used from a new address"
        CHAT_REFUSED = "chat_refused", "Chat decision refused"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Who, as they were named then: a plain id, no foreign key, so deleting an account changes
    # no entry (and none can be lost with it).
    actor_id = models.BigIntegerField(null=True, blank=True)
    actor_name = models.CharField(max_length=150, blank=True, help_text="Empty: the system (a command, a migration).")
    via = models.CharField(max_length=16, blank=True, help_text="page, api (a token), admin, command")
    address = models.GenericIPAddressField(null=True, blank=True)
    action = models.CharField(max_length=20, choices=Action.choices)
    kind = models.CharField(max_length=40, help_text="What was changed: agent, tool, rule, user…")
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=300, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    detail = models.TextField(blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["kind", "-at"], name="audit_by_kind"),
                   models.Index(fields=["actor_name", "-at"], name="audit_by_actor")]
        verbose_name_plural = "audit entries"

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or 'system'} {self.action} {self.kind} {self.object_repr}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise AppendOnly("audit entries are never changed")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("audit entries are never deleted")


class KnownAddress(models.Model):
    """An address an API token was used from: a new one is an audit entry."""

    token_id = models.BigIntegerField()
    address = models.GenericIPAddressField()
    first_seen = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["token_id", "address"], name="unique_token_address")]

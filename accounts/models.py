from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A key for scripts. Only a hash of the secret is stored: the plain key is shown once, when
    it is created, and cannot be read back from the database."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    # A token limited to one project sees that project only, with its person's role there.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        help_text="Empty: every project its person sees.",
    )
    # The key's first characters: enough to tell tokens apart in a list, useless to sign in.
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    def is_usable(self, now) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class SsoIdentity(models.Model):
    """A person of the identity provider: who they are here. Matched by the provider's `sub`
    (stable, never reassigned), never by e-mail or username, which can change hands."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)
    # The roles the last sign-in's claims gave (viewer, operator, admin), for the admin's list.
    roles = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique_subject")]
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ChatIdentity(models.Model):
    """A person of the chat workspace (a Slack member ID) and the account their clicks act as.
    Set by administrators (a project's admins on the projects page, site administrators there or in
    the admin): never claimed by the person, never matched by name or e-mail, which can change hands."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_identities")
    member_id = models.CharField(max_length=64, unique=True, help_text="The Slack member ID, e.g. U024BE7LH.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "chat identity"
        verbose_name_plural = "chat identities"

    def __str__(self) -> str:
        return f"{self.member_id} → {self.user}"

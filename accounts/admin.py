from django.contrib import admin, messages

from accounts.models import ApiToken, ChatIdentity, SsoIdentity
from accounts.services import api_tokens_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only: a token is made by its owner (its key shown to them once); an admin can only
    revoke it. Revoked tokens stay listed, so the record of who had access remains."""

    list_display = ("prefix", "name", "user", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "name", "user__username")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_revoke_permission(self, request):
        return request.user.has_perm("accounts.change_apitoken")

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke(self, request, queryset):
        count = api_tokens_revoke(tokens=queryset)
        self.message_user(request, f"{count} token(s) revoked.", messages.SUCCESS)


@admin.register(SsoIdentity)
class SsoIdentityAdmin(admin.ModelAdmin):
    """Who signs in through the identity provider, and the roles their last sign-in gave. Made by
    sign-ins only; deleting one unlinks the person (their next sign-in makes a new user)."""

    list_display = ("user", "subject", "issuer", "roles", "last_sign_in_at", "created_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "roles", "last_sign_in_at", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ChatIdentity)
class ChatIdentityAdmin(admin.ModelAdmin):
    """Which Slack member acts as which account when they click Approve or Reject in the channel."""

    list_display = ("member_id", "user", "created_at")
    search_fields = ("member_id", "user__username")
    autocomplete_fields = ()

from django.contrib import admin

from audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read-only: the log is append-only, superusers included."""

    list_display = ("at", "actor_name", "via", "action", "kind", "object_repr", "address")
    list_filter = ("action", "kind", "via")
    search_fields = ("actor_name", "object_repr")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

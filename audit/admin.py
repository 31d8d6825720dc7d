from django.contrib import admin

from audit.models import AuditEntry


class RecordAdmin(admin.ModelAdmin):
    """A record nobody edits: viewable by who may view it, never added, changed or deleted here,
    superusers included (its own service writes it; the admin would bypass the rules). Here, at
    the bottom of the imports, so that every app's records use this one (runs/admin.py)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(RecordAdmin):
    """Read-only: the log is append-only, superusers included."""

    list_display = ("at", "actor_name", "via", "action", "kind", "object_repr", "address")
    list_filter = ("action", "kind", "via")
    search_fields = ("actor_name", "object_repr")

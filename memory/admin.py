"""The memory in Django's admin: facts to look up by agent and customer (the memories page is the
everyday place; edits there keep who edited)."""
from django.contrib import admin

from memory.models import Memory, MemoryRead


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("pk", "agent", "customer", "text", "written_in_run", "approved_by_name", "created_at")
    list_filter = ("agent",)
    search_fields = ("text", "customer")
    raw_id_fields = ("written_by_run", "written_by_call", "edited_by")
    readonly_fields = ("idempotency_key", "written_in_run", "written_at_step", "approved_by_name",
                       "created_at", "updated_at")


@admin.register(MemoryRead)
class MemoryReadAdmin(admin.ModelAdmin):
    list_display = ("pk", "memory", "run", "call_key", "read_at")
    raw_id_fields = ("memory", "run", "call")

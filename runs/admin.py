from django.contrib import admin

from .models import Agent, Approval, Run, Step, ToolCall


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "max_iterations", "verifier", "updated_at")
    filter_horizontal = ("tools",)


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    fields = ("index", "iteration", "model", "finish_reason", "latency_ms", "tokens_in", "tokens_out")
    readonly_fields = fields
    can_delete = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("pk", "agent", "status", "stop_reason", "iterations", "created_at")
    list_filter = ("status", "stop_reason", "agent")
    search_fields = ("task",)
    raw_id_fields = ("rerun_of", "created_by")
    inlines = [StepInline]


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ("pk", "run_id", "tool_name", "status", "args_hash", "truncated")
    list_filter = ("status", "tool_name")
    raw_id_fields = ("run", "step")
    exclude = ("arguments",)  # raw arguments may hold secrets; the hash identifies them


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ("pk", "run_id", "status", "decided_by", "decided_at", "expires_at")
    list_filter = ("status",)
    raw_id_fields = ("tool_call", "run", "decided_by")

from django.contrib import admin, messages
from django.db import transaction

from audit.admin import RecordAdmin
from runs.lifecycle.agent_versions import agent_settings, version_record
from runs.lifecycle.archive import runs_delete
from runs.models import (
    Agent,
    Approval,
    ApprovalRule,
    ApprovalRuleVersion,
    ArchivedApproval,
    Budget,
    BudgetHold,
    BudgetRaise,
    Run,
    Step,
    ToolCall,
)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "max_iterations", "verifier", "updated_at")
    filter_horizontal = ("tools",)

    def save_related(self, request, form, formsets, change):
        # A save here is a version too, like one in the dashboard or the API (its tools are set by now).
        super().save_related(request, form, formsets, change)
        with transaction.atomic():
            version_record(agent=form.instance, settings=agent_settings(form.instance), user=request.user,
                           note="saved in the admin")


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
    # Frozen at launch (run_create): what the run was asked and allowed to do stays as launched.
    readonly_fields = ("agent", "task", "customer", "config", "overrides", "created_by", "rerun_of",
                       # What a fork started with: every figure takes it away (runs/observability/metrics/own_work.py).
                       "inherited_iterations", "inherited_tokens_in", "inherited_tokens_out", "inherited_cost_usd")
    inlines = [StepInline]

    def has_add_permission(self, request):
        # Runs are launched through run_launch (runs/lifecycle/launch.py: the launch page, the API, the
        # CLI), which makes them with run_create: it freezes
        # the agent's settings and the approval policy; a run added here would bypass it.
        return False

    # Deleting runs here does what pruning does: their decisions are archived first, in the same
    # transaction, so a run's approvals outlive it (Archived approvals).
    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Calls and approvals cannot be deleted on their own; with their run they may (archived).
        perms_needed -= {ToolCall._meta.verbose_name, Approval._meta.verbose_name}
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        runs_delete(run_ids=[obj.pk])
        messages.info(request, "Its decisions were archived: see Archived approvals.")

    def delete_queryset(self, request, queryset):
        runs_delete(run_ids=list(queryset.values_list("pk", flat=True)))
        messages.info(request, "Their decisions were archived: see Archived approvals.")


@admin.register(ToolCall)
class ToolCallAdmin(RecordAdmin):
    # Read-only: a call's status and args hash are what its approval refers to.
    list_display = ("pk", "run_id", "tool_name", "status", "args_hash", "truncated")
    list_filter = ("status", "tool_name")
    exclude = ("arguments",)  # raw arguments may hold secrets; the hash identifies them


@admin.register(Approval)
class ApprovalAdmin(RecordAdmin):
    # Decisions are append-only: made through approval_decide, only from pending.
    list_display = ("pk", "run_id", "status", "decided_by_name", "automatic", "decided_at", "expires_at")
    list_filter = ("status", "automatic")
    search_fields = ("decided_by_name", "reason")


@admin.register(ArchivedApproval)
class ArchivedApprovalAdmin(RecordAdmin):
    list_display = ("approval_id", "run_id", "agent_name", "tool_name", "status", "decided_by_name", "decided_at")
    list_filter = ("status", "automatic")
    search_fields = ("tool_name", "decided_by_name", "customer", "agent_name")


class ApprovalRuleVersionInline(admin.TabularInline):
    model = ApprovalRuleVersion
    extra = 0
    fields = ("version", "change", "changed_by_name", "changed_at", "snapshot")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(ApprovalRule)
class ApprovalRuleAdmin(RecordAdmin):
    # Read-only: the dashboard's editor (Rules) versions every change and records who made it;
    # a write here would bypass the audit trail.
    list_display = ("name", "position", "agent", "tool_pattern", "action", "version", "enabled", "shadow", "updated_by_name")
    list_filter = ("action", "enabled", "shadow", "agent")
    search_fields = ("name", "tool_pattern")
    inlines = [ApprovalRuleVersionInline]


@admin.register(ApprovalRuleVersion)
class ApprovalRuleVersionAdmin(RecordAdmin):
    list_display = ("rule_key", "version", "change", "changed_by_name", "changed_at")
    list_filter = ("change",)


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    # Editable here as on the Budgets page; a change reaches the loop within a few seconds.
    list_display = ("name", "scope", "agent", "person", "measure", "period", "limit", "alert_share", "enabled")
    list_filter = ("scope", "measure", "period", "enabled")
    search_fields = ("name",)


@admin.register(BudgetRaise)
class BudgetRaiseAdmin(RecordAdmin):
    # Read-only: raises are made from the queue, which lets the runs they cover go on at once.
    list_display = ("budget", "run", "limit", "until", "by_name", "created_at")


@admin.register(BudgetHold)
class BudgetHoldAdmin(RecordAdmin):
    list_display = ("run", "budget", "sentence", "since")

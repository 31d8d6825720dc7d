"""Datasets and experiments in Django's admin: to look things up. Cases are written through the
dashboard, the API or an import (their checks are validated there); experiments are started there
too, and their results are the scorer's alone."""
from django.contrib import admin

from evals.models import Case, CaseResult, Dataset, Experiment


class CaseInline(admin.TabularInline):
    model = Case
    fields = ("name", "task", "customer", "source_run", "source_step")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "created_at")
    search_fields = ("name", "description")
    inlines = [CaseInline]


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ("pk", "dataset", "agent", "label", "status", "cases_done", "cases_passed", "cases_total", "created_at")
    list_filter = ("status", "agent")
    readonly_fields = [f.name for f in Experiment._meta.fields]

    def has_add_permission(self, request):
        return False  # started from a dataset's page, the API or manage.py eval


@admin.register(CaseResult)
class CaseResultAdmin(admin.ModelAdmin):
    list_display = ("pk", "experiment", "case_name", "status", "passed", "run")
    list_filter = ("status", "passed")
    readonly_fields = [f.name for f in CaseResult._meta.fields]

    def has_add_permission(self, request):
        return False

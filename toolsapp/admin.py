from django.contrib import admin, messages
from django.db import transaction

from .decision_settings import decision_settings_save
from .forms import ToolForm
from .mcp.forms import McpServerForm
from .mcp.services import deletion_summary, mcp_server_delete, mcp_server_save
from .models import McpServer, Order, Ticket, Tool, WeatherReport
from .services import tool_save


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    # The dashboard's editor and its one write path, so the admin keeps the same rules.
    form = ToolForm
    readonly_fields = ("mcp_server",)
    list_display = ("name", "kind", "mcp_server", "destructive", "critical", "always_ask", "parallel_safe", "idempotent",
                    "enabled")
    list_filter = ("kind", "destructive", "critical", "always_ask", "in_experiments", "enabled")
    list_select_related = ("mcp_server",)
    search_fields = ("name", "description")

    def save_model(self, request, obj, form, change):
        with transaction.atomic():  # the decision settings with the tool, checked against it as saved
            decision_settings_save(tool=tool_save(tool=obj, data=form.cleaned_data), data=form.cleaned_data)


admin.site.register(WeatherReport)
admin.site.register(Ticket)
admin.site.register(Order)


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    list_display = ("name", "transport", "enabled", "last_discovered_at")
    list_filter = ("transport", "enabled")
    search_fields = ("name", "command", "url")
    readonly_fields = ("last_discovered_at", "last_error")
    form = McpServerForm  # the dashboard's rule: an unlisted stdio command needs a superuser

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.user = request.user  # a class made for this request
        return form

    def save_model(self, request, obj, form, change):
        mcp_server_save(server=obj, user=request.user)

    # Deleting here does what the dashboard's delete does: the server's tools are disabled, and
    # the admin is told which.
    def delete_model(self, request, obj):
        messages.warning(request, deletion_summary(obj.name, mcp_server_delete(server=obj)))

    def delete_queryset(self, request, queryset):
        for server in queryset:
            self.delete_model(request, server)

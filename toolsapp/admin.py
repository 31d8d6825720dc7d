from django.contrib import admin

from .models import McpServer, Order, Ticket, Tool, WeatherReport


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "destructive", "parallel_safe", "idempotent", "enabled")
    list_filter = ("kind", "destructive", "enabled")
    search_fields = ("name", "description")


admin.site.register(WeatherReport)
admin.site.register(Ticket)
admin.site.register(Order)


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    list_display = ("name", "transport", "enabled", "last_discovered_at")
    list_filter = ("transport", "enabled")
    search_fields = ("name", "command", "url")
    readonly_fields = ("last_discovered_at", "last_error")

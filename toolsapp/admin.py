from django.contrib import admin

from .models import Order, Ticket, Tool, WeatherReport


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "destructive", "parallel_safe", "idempotent", "enabled")
    list_filter = ("kind", "destructive", "enabled")
    search_fields = ("name", "description")


admin.site.register(WeatherReport)
admin.site.register(Ticket)
admin.site.register(Order)

"""Site administrators manage projects and who has which role in each (Django's admin)."""
from django.contrib import admin

from projects.models import Membership, Project
from projects.people import admin_site_entry

# The admin shows every project's things: only site administrators enter it (projects/people.py).
admin.site.has_permission = admin_site_entry


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "chat_channel", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role"]
    list_filter = ["project", "role"]
    search_fields = ["user__username", "project__name"]
    autocomplete_fields = ["user"]

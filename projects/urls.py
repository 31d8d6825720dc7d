from django.urls import path

from projects import views

urlpatterns = [
    path("projects/", views.project_list, name="project_list"),
    path("projects/new/", views.project_create, name="project_create"),
    # The header's switch: the project is named in the form, one of the person's own.
    path("projects/current/", views.project_switch, name="project_switch"),
    # The project and the member are named in the form (the project's people are not things of
    # its own with an address): each view finds them, 404 for a project the person does not see.
    path("projects/members/add/", views.member_add, name="project_member_add"),
    path("projects/members/change/", views.member_change, name="project_member_change"),
    path("projects/nudge/", views.nudge_settings, name="project_nudge_settings"),
]

"""The projects page's parts that need agents and tools (the projects app sits below them)."""
from django.urls import path

from runs.web.views import project_copies

urlpatterns = [
    # The project is named in the query and the form, as on the projects page: the view checks it.
    path("projects/copy/", project_copies.project_copy, name="project_copy"),
]

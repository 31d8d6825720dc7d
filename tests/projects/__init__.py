"""Helpers for the projects' tests: two teams' projects and people with a role in one of them."""
from django.contrib.auth.models import Group, User

from projects.models import Membership, Project


def project(name: str) -> Project:
    return Project.objects.get_or_create(slug=name.lower(), defaults={"name": name})[0]


def member(username: str, project_: Project, role: str = "operators", password: str = "pw-long-enough-1") -> User:
    """A person whose only role is `role` (a role group's name) in `project_`."""
    user = User.objects.filter(username=username).first() or User.objects.create_user(username, password=password)
    Membership.objects.update_or_create(project=project_, user=user, defaults={"role": Group.objects.get(name=role)})
    return user

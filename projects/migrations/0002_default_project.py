"""An upgrade puts everything into a project "Default", and today's site roles become roles
there: a one-team installation sees no change, and a second team's project starts empty, seen
by its own members (and superusers) only. The reverse gives everyone their Default role back as a
site role, so going back loses nobody's access."""
from django.db import migrations

ROLE_GROUPS = ("viewers", "operators", "admins")


def default_project(Project):
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    return project


def roles_into_default(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    Group = apps.get_model("auth", "Group")
    project = default_project(Project)
    # A person in several role groups keeps the widest role: admins, then operators, then viewers.
    for group in Group.objects.filter(name__in=ROLE_GROUPS).order_by("name"):
        for user in group.user_set.all():
            if not Membership.objects.filter(project=project, user=user).exists():
                Membership.objects.create(project=project, user=user, role=group)
            group.user_set.remove(user)


def roles_out_of_default(apps, schema_editor):
    Membership = apps.get_model("projects", "Membership")
    for membership in Membership.objects.filter(project__slug="default").select_related("role", "user"):
        membership.role.user_set.add(membership.user)
    Membership.objects.filter(project__slug="default").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0001_initial"),
        # The role groups exist from here (runs/roles.py), and so do the people in them.
        ("runs", "0040_budgets"),
    ]

    operations = [migrations.RunPython(roles_into_default, roles_out_of_default)]

"""Projects: one team's agents, tools, rules, budgets, webhooks and datasets, and the people who
work on them, each with a role there. A role is one of the site's role groups (runs/roles.py):
its permissions apply inside the project only. People in a role group directly (and superusers)
have that role in every project: the platform team."""
from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models

DEFAULT_SLUG = "default"


class Project(models.Model):
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=50, unique=True)
    description = models.TextField(blank=True)
    chat_channel = models.CharField(
        max_length=100, blank=True,
        help_text="The chat channel (its id, e.g. C0123ABCD) where this project's waiting calls are posted, "
        "with the site's SLACK_BOT_TOKEN; empty: SLACK_CHANNEL.",
    )
    # The nudge against rubber stamps (runs/supervision/quality/nudges.py): off while 0.
    nudge_after_quick_approvals = models.PositiveSmallIntegerField(
        default=0, help_text="After this many quick approvals in a row by one person, the next card asks them for "
        "a one-line reason before Approve. 0: never.",
    )
    quick_approval_seconds = models.PositiveSmallIntegerField(
        default=5, help_text="An approval within this many seconds of its card appearing counts as quick.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects", blank=True,
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A person's role in one project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.ForeignKey(
        Group, on_delete=models.PROTECT, related_name="+",
        help_text="Its permissions apply in this project only (viewers, operators or admins).",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_role_per_project")]
        ordering = ["project__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} in {self.project}"


def default_project_id() -> int:
    """What a new agent, rule, budget, webhook or dataset belongs to when nobody says: the project
    an upgrade put everything in."""
    project, _ = Project.objects.get_or_create(slug=DEFAULT_SLUG, defaults={"name": "Default"})
    return project.pk


class InProject:
    """For a model with a `project`: saved without one, it goes into Default. Done at the save,
    not as the field's default, so that making an instance (a draft to check, a preview) costs no
    query."""

    def save(self, *args, **kwargs):
        if self.project_id is None:
            self.project_id = default_project_id()
        super().save(*args, **kwargs)

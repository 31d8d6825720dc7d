"""The projects page's forms: a new project, a person added to a project with a role, a member's
role changed, the project's nudge thresholds; and the header's project switch."""
from django import forms
from django.utils.text import slugify

from projects.models import Project
from projects.people import ROLES

ROLE_CHOICES = list(ROLES.items())


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="Person (their username)")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="viewers")


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class NudgeSettingsForm(forms.ModelForm):
    """When the next card asks a person for a reason before Approve (runs/supervision/quality/nudges.py)."""

    nudge_after_quick_approvals = forms.IntegerField(
        min_value=0, max_value=100, label="Ask for a reason after this many quick approvals in a row (0: never)")
    quick_approval_seconds = forms.IntegerField(
        min_value=1, max_value=600, label="An approval is quick within this many seconds of its card appearing")

    class Meta:
        model = Project
        fields = ["nudge_after_quick_approvals", "quick_approval_seconds"]


class ProjectCreateForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name")
    slug = forms.SlugField(max_length=50, required=False, label="Short name (for the API and single sign-on)",
                           help_text="Letters, digits and dashes; empty: made from the name.")
    description = forms.CharField(max_length=2000, required=False, label="What the team does with it",
                                  widget=forms.Textarea(attrs={"rows": 2}))
    admin = forms.CharField(max_length=150, label="Its first admin (their username)",
                            help_text="They add the project's people and give them roles.")

    def clean(self):
        data = super().clean()
        if data.get("name") and not data.get("slug"):
            data["slug"] = slugify(data["name"])[:50]
            if not data["slug"]:
                self.add_error("slug", "Give a short name: the name has no letters or digits to make one from.")
        return data


class ProjectSwitchForm(forms.Form):
    project = forms.SlugField(max_length=50)
    next = forms.CharField(max_length=2000, required=False)

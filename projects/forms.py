"""The projects page's forms: a person added to a project with a role, a member's role changed,
the project's nudge thresholds."""
from django import forms

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

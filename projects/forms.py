"""The projects page's forms: a person added to a project with a role, a member's role changed."""
from django import forms

from projects.people import ROLES

ROLE_CHOICES = list(ROLES.items())


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="Person (their username)")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="viewers")


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)

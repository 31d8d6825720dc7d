"""The budgets page's forms: a budget (its scope names one agent or one person, or neither), and a
raise made from the queue where a run waits on a spent budget."""
import math
from datetime import timedelta

from django import forms
from django.contrib.auth import get_user_model
from django.utils import timezone

from projects.access import projects_with, scoped
from projects.choices import people_of, project_field_clean, project_field_prepare
from projects.empty_lists import missing_note
from runs.controls.budgets import budget_problems
from runs.models import Agent, Budget


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = ["project", "name", "scope", "agent", "person", "measure", "period", "limit", "alert_share", "enabled"]
        labels = {"limit": "Limit", "alert_share": "Warn at (share of the limit)", "person": "Person who launches"}
        help_texts = {
            "agent": "For \u201cone agent's runs\u201d only.",
            "person": "For \u201cruns one person launches\u201d only.",
            "alert_share": "0.8 warns by webhook and e-mail at 80 %, once a period.",
        }

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        agents = Agent.objects.order_by("name")
        accounts = get_user_model().objects.filter(is_active=True).order_by("username")
        # The people of the budget's project (of a new one: of the projects where the person may
        # add one; the one chosen is checked in clean), not every account of the site.
        if self.instance.pk is not None or user is None:
            del self.fields["project"]  # a budget stays in the project it was made in
            people = people_of({self.instance.project_id} if self.instance.pk is not None else None, accounts)
            if self.instance.pk is not None:
                agents = agents.filter(project_id=self.instance.project_id)
                if self.instance.person_id:
                    people = people | accounts.filter(pk=self.instance.person_id)  # it keeps its own
        else:
            project_field_prepare(self, user, "runs.add_budget")
            agents = scoped(agents, user)
            people = people_of(projects_with(user, "runs.add_budget"), accounts)
        self.fields["agent"].queryset, self.fields["person"].queryset = agents, people
        if "project" in self.fields:
            self.fields["project"].help_text = "It counts this project's runs only. Set when it is created."
        project = self.instance.project if self.instance.pk is not None else \
            self.fields["project"].initial if "project" in self.fields else None
        self.agents_missing = missing_note(self, project=project, user=user)
        self.fields["limit"].widget.attrs.update(min="0", step="any")
        self.fields["alert_share"].widget.attrs.update(min="0.01", max="1", step="0.01")

    def clean(self):
        data = super().clean()
        project_field_clean(self, data, self.user, "runs.add_budget")
        project_id = self.instance.project_id if self.instance.pk is not None else getattr(data.get("project"), "pk", None)
        agent = data.get("agent")
        if agent is not None and project_id is not None and agent.project_id != project_id:
            self.add_error("agent", f"{agent.name} is not an agent of this budget's project.")
        person = data.get("person")
        if person is not None and project_id is not None and self.instance.pk is None \
                and not people_of({project_id}).filter(pk=person.pk).exists():
            # Another team's person, in the words of an account that is not there.
            field = self.fields["person"]
            self.add_error("person", forms.ValidationError(field.error_messages["invalid_choice"], code="invalid_choice",
                                                           params={"value": person.pk}))
        problems = budget_problems(scope=data.get("scope"), agent=data.get("agent"), person=data.get("person"),
                                   measure=data.get("measure"), limit=data.get("limit"),
                                   alert_share=data.get("alert_share"))
        for field, text in problems.items():
            if field in data or field in ("agent", "person"):
                self.add_error(field, text)
        if data.get("scope") != Budget.Scope.AGENT:
            data["agent"] = None
        if data.get("scope") != Budget.Scope.PERSON:
            data["person"] = None
        return data


class BudgetRaiseForm(forms.Form):
    limit = forms.FloatField(label="New limit")
    until = forms.DateTimeField(label="Until", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
                                input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"])
    applies_to = forms.ChoiceField(choices=[("run", "This run only"), ("all", "Every run of this budget")],
                                   initial="run", widget=forms.RadioSelect)
    run = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def clean_limit(self):
        limit = self.cleaned_data["limit"]
        if not math.isfinite(limit) or limit < 0:
            raise forms.ValidationError("A number, 0 or more.")
        return limit

    def clean_until(self):
        until = self.cleaned_data["until"]
        if until <= timezone.now():
            raise forms.ValidationError("A time still to come.")
        if until - timezone.now() > timedelta(days=366):
            raise forms.ValidationError("At most a year from now: change the budget itself for longer.")
        return until

    def clean(self):
        data = super().clean()
        if data.get("applies_to") == "run" and not data.get("run"):
            self.add_error("applies_to", "Which run? Raise it from the run's request in the queue.")
        return data

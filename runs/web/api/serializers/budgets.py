"""Budgets in the API: the same fields and checks as the Budgets page (budget_problems), what the
period used so far, and a raise."""
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework import serializers

from apikit.fields import (
    NameRelatedField,
    choice,
    fields_scoped,
    in_project,
    people_scoped,
    person_in_project,
    project_chosen,
    project_field,
    service_errors,
)
from apikit.strict import KnownFieldsOnly
from runs.controls.budgets import budget_problems, budgets_used, period_end
from runs.models import Agent, Budget


class BudgetListSerializer(serializers.ListSerializer):
    """A list's budgets: what their periods used, in one query for the page, not one per budget."""

    def to_representation(self, data):
        budgets = list(data.all() if hasattr(data, "all") else data)
        self.child.used_by_budget = budgets_used(budgets)
        return super().to_representation(budgets)


class BudgetSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    agent = NameRelatedField(slug_field="name", queryset=Agent.objects.all(), required=False, allow_null=True,
                             help_text='The agent\'s name, for the scope "agent".')
    person = NameRelatedField(slug_field="username", queryset=get_user_model().objects.all(), required=False,
                              allow_null=True, help_text='The username of who launches, for the scope "person".')
    scope = choice(Budget.Scope.choices, "BudgetScope", required=False)
    measure = choice(Budget.Measure.choices, "BudgetMeasure", required=False)
    period = choice(Budget.Period.choices, "BudgetPeriod", required=False)
    used = serializers.SerializerMethodField(help_text="What the current period has used so far.")
    project = project_field()
    period_ends = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = ["id", "project", "name", "scope", "agent", "person", "measure", "period", "limit", "alert_share", "enabled",
                  "used", "period_ends", "created_at", "updated_at"]
        read_only_fields = ["id", "created_at", "updated_at"]
        list_serializer_class = BudgetListSerializer

    used_by_budget: dict[int, float] | None = None  # set by BudgetListSerializer

    def get_used(self, budget) -> float:
        if self.used_by_budget is not None and budget.pk in self.used_by_budget:
            return self.used_by_budget[budget.pk]
        return budgets_used([budget])[budget.pk]

    def get_period_ends(self, budget) -> str:
        return period_end(budget.period, timezone.now()).isoformat()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fields_scoped(self, "agent")
        people_scoped(self, "person")

    def validate(self, attrs):
        project = project_chosen(self, attrs, "runs.add_budget")
        if self.instance is None:
            attrs["project"] = project
        in_project(attrs.get("agent"), project, "agent")
        person_in_project(self, attrs, "person", project)
        current = self.instance
        merged = {name: attrs.get(name, getattr(current, name, None) if current else None)
                  for name in ("scope", "agent", "person", "measure", "limit", "alert_share")}
        merged["scope"] = merged["scope"] or Budget.Scope.SITE
        merged["measure"] = merged["measure"] or Budget.Measure.COST
        problems = budget_problems(**merged)
        if problems:
            raise service_errors({field: [text] for field, text in problems.items()})
        if merged["scope"] != Budget.Scope.AGENT:
            attrs["agent"] = None
        if merged["scope"] != Budget.Scope.PERSON:
            attrs["person"] = None
        return attrs


class BudgetRaiseSerializer(KnownFieldsOnly, serializers.Serializer):
    limit = serializers.FloatField(help_text="The new limit, above the budget's own.")
    until = serializers.DateTimeField(help_text="Until when (at most a year).")
    run_id = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                      help_text="Only this run; empty: every run the budget covers.")


class BudgetRaisedSerializer(serializers.Serializer):
    released = serializers.ListField(child=serializers.IntegerField(), help_text="The runs that went on.")


class WaitingOnBudgetSerializer(serializers.Serializer):
    run_id = serializers.IntegerField(source="run.pk")
    run_status = serializers.CharField(source="run.status")
    agent = serializers.CharField(source="run.agent.name")
    budget_id = serializers.IntegerField(source="hold.budget_id", allow_null=True)
    sentence = serializers.CharField(source="hold.sentence")
    since = serializers.DateTimeField(source="hold.since")
    used = serializers.FloatField(allow_null=True)
    limit = serializers.FloatField(allow_null=True)
    period_ends = serializers.DateTimeField(allow_null=True)

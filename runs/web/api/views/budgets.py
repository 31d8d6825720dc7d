"""Budgets: CRUD (admins write, everyone who sees runs reads), a raise, and the runs waiting on one."""
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from apikit.schema import errors
from apikit.views import CrudViewSet, crud_schema
from projects.access import projects_with
from runs.controls.budget_requests import RaiseRefused, budget_raise, budget_requests
from runs.models import Budget
from runs.roles import PERM_CHANGE_BUDGET, PERM_VIEW_BUDGET
from runs.web.api.serializers.budgets import (
    BudgetRaisedSerializer,
    BudgetRaiseSerializer,
    BudgetSerializer,
    WaitingOnBudgetSerializer,
)


@crud_schema("Budget", BudgetSerializer)
class BudgetViewSet(CrudViewSet):
    queryset = Budget.objects.select_related("agent", "person", "project").order_by("name", "pk")
    serializer_class = BudgetSerializer
    lookup_value_regex = r"\d+"
    view_perm, manage_perm, add_perm, delete_perm = (PERM_VIEW_BUDGET, PERM_CHANGE_BUDGET, "runs.add_budget",
                                                     "runs.delete_budget")

    @property
    def required_perms(self):
        perms = dict(super().required_perms)
        if self.action == "raise_budget":
            perms["POST"] = (PERM_CHANGE_BUDGET,)
        return perms

    @extend_schema(summary="Raise a budget until a time, for one run or every run (admins); "
                           "the runs it held go on where it now allows them",
                   request=BudgetRaiseSerializer, responses={200: BudgetRaisedSerializer, **errors(400, 404)})
    @action(detail=True, methods=["post"], url_path="raise", url_name="raise")
    def raise_budget(self, request, pk=None):
        budget = self.get_object()
        serializer = BudgetRaiseSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            released = budget_raise(budget_id=budget.pk, user=request.user, limit=data["limit"],
                                    until=data["until"], run_id=data.get("run_id"))
        except RaiseRefused as exc:
            raise ValidationError({"limit" if "limit" in str(exc) else "non_field_errors": [str(exc)]}) from exc
        return Response({"released": released})

    @extend_schema(summary="The runs waiting on a spent budget, oldest first (the queue's budget requests), "
                           "of the projects where you may see budgets",
                   responses={200: WaitingOnBudgetSerializer(many=True), **errors()})
    @action(detail=False, methods=["get"], pagination_class=None)  # at most 100, the queue's own
    def requests(self, request):
        # Cut as the queue page cuts them: another project's runs, agents and budgets are not the caller's.
        projects = projects_with(request.user, PERM_VIEW_BUDGET)
        return Response(WaitingOnBudgetSerializer(budget_requests(projects=projects), many=True).data)

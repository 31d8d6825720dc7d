"""Approval rules: CRUD through rule_create / rule_update / rule_delete (each change versioned),
the audit trail of one rule, a preview that saves nothing, and the backtest of a whole rule set.

A create or change of a rule that would have approved calls people rejected answers 409 naming
them (saved_over) unless the request confirms exactly those (confirm_saved_over)."""
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from apikit.schema import errors
from apikit.views import CrudViewSet, crud_schema
from projects.access import may_see
from projects.choices import project_problem
from runs.models import ApprovalRule, ApprovalRuleVersion
from runs.roles import PERM_ADD_RULES, PERM_DELETE_RULES, PERM_MANAGE_RULES, PERM_VIEW_RULES
from runs.supervision.rules.backtest import rule_backtest, ruleset_backtest, ruleset_specs
from runs.supervision.rules.changes import rule_delete
from runs.supervision.rules.preview import draft_spec, rule_preview
from runs.supervision.rules.saved_over import SavedOverUnconfirmed
from runs.supervision.rules.shadow_report import shadow_report
from runs.web.api.serializers.rules import (
    RuleDraftSerializer,
    RulePreviewSerializer,
    RuleSerializer,
    RuleSetBacktestRequestSerializer,
    RuleSetBacktestSerializer,
    RuleVersionSerializer,
    SavedOverCallSerializer,
    ShadowReportSerializer,
)

SAVED_OVER = OpenApiResponse(inline_serializer("RuleSavedOver", {
    "detail": serializers.CharField(help_text="The calls, in words, and how to confirm them."),
    "saved_over": SavedOverCallSerializer(many=True),
}), description="The rule would have approved calls people rejected (saved_over names every one): send their "
   "approval ids as confirm_saved_over, once read, to save it over them.")


def _saving(summary: str, code: int):
    return extend_schema(summary=summary, responses={code: RuleSerializer, 409: SAVED_OVER, **errors(400, 404)})


@extend_schema_view(
    create=_saving("Create a rule (admins)", 201),
    update=_saving("Replace a rule (admins)", 200),
    partial_update=_saving("Change a rule (admins)", 200),
)
@crud_schema("Rule", RuleSerializer)
class RuleViewSet(CrudViewSet):
    queryset = ApprovalRule.objects.select_related("agent", "group", "project").order_by("position", "pk")
    serializer_class = RuleSerializer
    lookup_value_regex = r"\d+"
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_RULES, PERM_MANAGE_RULES, PERM_ADD_RULES, PERM_DELETE_RULES

    def perform_destroy(self, instance):
        rule_delete(rule=instance, user=self.request.user)

    def create(self, request, *args, **kwargs):
        try:
            return super().create(request, *args, **kwargs)
        except SavedOverUnconfirmed as exc:
            return _saved_over_refused(exc)

    def update(self, request, *args, **kwargs):  # PATCH too
        try:
            return super().update(request, *args, **kwargs)
        except SavedOverUnconfirmed as exc:
            return _saved_over_refused(exc)

    @extend_schema(
        summary="What a rule would have done to the last 1,000 destructive calls (admins; saves nothing)",
        request=RuleDraftSerializer, responses={200: RulePreviewSerializer, **errors(400)},
    )
    @action(detail=False, methods=["post"])
    def preview(self, request):
        serializer = RuleDraftSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        spec, project_id = draft_spec(serializer.validated_data), serializer.project.pk
        return Response({**rule_preview(spec, project_id=project_id).as_dict(),
                         "backtest": rule_backtest(spec, project_id=project_id).as_dict()})

    @extend_schema(
        summary="A whole rule set as drafted, replayed over the calls people decided in its project (rule "
        "managers of the project; saves nothing)",
        description="Each call a person decided in the project in the last BACKTEST_DAYS days (30) goes through the "
        "loop's routing with the set tried in the order given (first match wins) and is compared with what the "
        "person decided. Disagreements come first (approving what a person rejected before the others), each with "
        "its card's evidence and its arguments masked; calls decided automatically or by nobody are counted apart. "
        "Twins and grants are not replayed.",
        request=RuleSetBacktestRequestSerializer, responses={200: RuleSetBacktestSerializer, **errors(400)},
    )
    @action(detail=False, methods=["post"])
    def backtest(self, request):
        given = RuleSetBacktestRequestSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        project = given.validated_data["project"]
        problem = project_problem(request.user, PERM_MANAGE_RULES, project) or project_problem(
            request.user, PERM_ADD_RULES, project)
        if problem:
            if may_see(request.user, project.pk):
                raise PermissionDenied(problem)
            raise ValidationError({"project": [problem]})  # another team's project: as if there were none
        drafts, problems = [], {}
        for index, rule in enumerate(given.validated_data["rules"]):
            draft = RuleDraftSerializer(data={**rule, "project": project.slug}, context=self.get_serializer_context())
            if draft.is_valid():
                drafts.append(draft.validated_data)
            else:
                problems[str(index)] = draft.errors
        if problems:
            raise ValidationError({"rules": problems})
        specs, left_out = ruleset_specs(drafts)
        return Response({**ruleset_backtest(specs, project_id=project.pk).as_dict(), "left_out": left_out})

    @extend_schema(summary="The versions of a rule, newest first (its audit trail)",
                   responses={200: RuleVersionSerializer(many=True), **errors(404)})
    @action(detail=True, methods=["get"])
    def versions(self, request, pk=None):
        rule = self.get_object()
        rows = ApprovalRuleVersion.objects.filter(rule_key=rule.pk).order_by("-version")
        return self.get_paginated_response(RuleVersionSerializer(self.paginate_queryset(rows), many=True).data)

    @extend_schema(summary="What the rule decided in shadow against what people decided, per version",
                   responses={200: ShadowReportSerializer, **errors(404)})
    @action(detail=True, methods=["get"])
    def shadow(self, request, pk=None):
        rule = self.get_object()
        return Response(shadow_report(rule.pk).as_dict())


def _saved_over_refused(exc: SavedOverUnconfirmed) -> Response:
    return Response({"detail": str(exc), "saved_over": exc.calls}, status=status.HTTP_409_CONFLICT)

"""Approval rules: CRUD through rule_create / rule_update / rule_delete (each change versioned),
the audit trail of one rule, and a preview that saves nothing."""
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from runs.models import ApprovalRule, ApprovalRuleVersion
from runs.roles import PERM_ADD_RULES, PERM_DELETE_RULES, PERM_MANAGE_RULES, PERM_VIEW_RULES
from runs.supervision.rule_admin import rule_delete
from runs.supervision.rule_preview import draft_spec, rule_preview
from runs.supervision.shadow_report import shadow_report
from runs.web.api.schema import errors
from runs.web.api.serializers.rules import (
    RuleDraftSerializer,
    RulePreviewSerializer,
    RuleSerializer,
    RuleVersionSerializer,
    ShadowReportSerializer,
)
from runs.web.api.views.base import CrudViewSet, _crud_schema


@_crud_schema("Rule", RuleSerializer)
class RuleViewSet(CrudViewSet):
    queryset = ApprovalRule.objects.select_related("agent", "group", "project").order_by("position", "pk")
    serializer_class = RuleSerializer
    lookup_value_regex = r"\d+"
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_RULES, PERM_MANAGE_RULES, PERM_ADD_RULES, PERM_DELETE_RULES

    def perform_destroy(self, instance):
        rule_delete(rule=instance, user=self.request.user)

    @extend_schema(
        summary="What a rule would have done to the last 1,000 destructive calls (admins; saves nothing)",
        request=RuleDraftSerializer, responses={200: RulePreviewSerializer, **errors(400)},
    )
    @action(detail=False, methods=["post"])
    def preview(self, request):
        serializer = RuleDraftSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        counts = rule_preview(draft_spec(serializer.validated_data), project_id=serializer.project.pk)
        return Response(counts.as_dict())

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

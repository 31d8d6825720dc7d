"""Approvals in the API: the pending queue, a decision and its answer."""
from rest_framework import serializers

from runs.api.serializers.fields import choice
from runs.models import Approval, ArchivedApproval


class ApprovalBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = choice(Approval.Status.choices, "ApprovalStatus")
    decided_by = serializers.CharField(allow_null=True, help_text="Who decided, as named when they decided; kept after their account is deleted.")
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    automatic = serializers.BooleanField()
    expires_at = serializers.DateTimeField(allow_null=True)


class PendingApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    agent = serializers.CharField()
    task = serializers.CharField()
    tool = serializers.CharField()
    call_id = serializers.CharField()
    args_hash = serializers.CharField()
    arguments = serializers.CharField(
        allow_blank=True, help_text="Pretty-printed JSON; fields the tool marks sensitive are shown as ••••."
    )
    arguments_problem = serializers.CharField(allow_blank=True)
    raw_arguments = serializers.CharField(allow_blank=True, help_text="Only for unparsable arguments of a tool that masks nothing.")
    unseen_identifiers = serializers.ListField(
        child=serializers.CharField(), help_text="Identifiers the model never saw in the task or a tool result."
    )
    model_said = serializers.CharField(allow_blank=True)
    note = serializers.CharField(allow_blank=True)
    requested_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    expired = serializers.BooleanField()


class DecisionSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class DecisionResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    approval = ApprovalBriefSerializer()


class ArchivedApprovalSerializer(serializers.ModelSerializer):
    status = choice(Approval.Status.choices, "ApprovalStatus")

    class Meta:
        model = ArchivedApproval
        fields = [
            "id", "approval_id", "run_id", "agent_name", "customer", "run_task", "tool_name", "call_id", "args_hash",
            "arguments", "call_status", "status", "note", "reason", "automatic", "decided_by_name", "requested_at",
            "decided_at", "archived_at",
        ]
        extra_kwargs = {"arguments": {"help_text": "As the model sent them, fields the tool marks sensitive masked."}}


class ArchivedApprovalPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The next page, or null after the last one.")
    results = ArchivedApprovalSerializer(many=True)

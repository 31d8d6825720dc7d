"""Approval rules in the API. The fields read the input; rule_errors (runs.supervision.rule_admin)
holds every rule on what a rule may be, shared with the dashboard's editor."""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.models import Agent, ApprovalRule, ApprovalRuleVersion
from runs.supervision.rule_admin import RULE_FIELDS, rule_create, rule_errors, rule_update
from runs.supervision.rules import OPERATORS
from runs.web.api.serializers.fields import (
    NameRelatedField,
    choice,
    fields_scoped,
    people_scoped,
    person_in_project,
    project_chosen,
    project_field,
    service_errors,
)
from runs.web.api.strict import KnownFieldsOnly

CONDITIONS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "A JSON path into the arguments: $.amount, $.items[0].sku."},
            "op": {"type": "string", "enum": list(OPERATORS)},
            "value": {"description": 'A number (finite), text, true/false/null, a list (for "in"), an RE2 pattern '
                      '(for "fullmatch": the whole value must match; for "matches": the value need only contain '
                      'a match), or "$run.customer" (the run\'s customer; never matches a run without one).'},
        },
        "required": ["path", "op"],
    },
}


@extend_schema_field(CONDITIONS_SCHEMA)
class ConditionsField(serializers.JSONField):
    """Any JSON here; rule_errors says in words what is wrong with it ("Condition 2: lt compares
    with a number.")."""


class RuleSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    agent = NameRelatedField(
        slug_field="name", queryset=Agent.objects.all(), required=False, allow_null=True,
        help_text="The agent's name: only its runs. Null: every agent.",
    )
    group = NameRelatedField(
        slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True,
        help_text="With ask_group: the group whose members decide.",
    )
    launched_by = NameRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), required=False, allow_null=True,
        help_text="The username of the account whose runs this rule covers (read back as its current username). "
        "Null: any launcher.",
    )
    quorum_groups = NameRelatedField(
        slug_field="name", queryset=Group.objects.all(), many=True, required=False,
        help_text="With ask_quorum: the groups (by name) that must each give one of the approvals, from different people.",
    )
    conditions = ConditionsField(required=False, help_text="All must hold.")
    action = choice(ApprovalRule.Action.choices, "RuleAction", required=False)
    project = project_field()

    class Meta:
        model = ApprovalRule
        fields = ["id", "project", *RULE_FIELDS, "launched_by_unresolved", "version", "updated_by_name", "created_at", "updated_at"]
        read_only_fields = ["launched_by_unresolved", "version", "updated_by_name", "created_at", "updated_at"]
        # Blank text reaches rule_errors, which says what the field is for.
        extra_kwargs = {"name": {"allow_blank": True}, "tool_pattern": {"allow_blank": True}}

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["quorum_groups"] = sorted(data.get("quorum_groups") or [])  # by name, as everywhere
        return data

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fields_scoped(self, "agent")
        people_scoped(self, "launched_by")

    def validate(self, attrs):
        self.project = project_chosen(self, attrs, "runs.add_approvalrule")
        person_in_project(self, attrs, "launched_by", self.project)
        errors = rule_errors(rule=self.instance, data=attrs, project=self.project)
        if errors:
            raise service_errors(errors)
        return attrs

    def create(self, validated_data):
        return rule_create(data=validated_data, user=self.context["request"].user, project=self.project)

    def update(self, instance, validated_data):
        return rule_update(rule=instance, data=validated_data, user=self.context["request"].user)


class RuleDraftSerializer(RuleSerializer):
    """A rule to preview: every field may be left out (a new rule's defaults apply)."""

    class Meta(RuleSerializer.Meta):
        extra_kwargs = {**RuleSerializer.Meta.extra_kwargs, "name": {"allow_blank": True, "required": False}}

    def validate(self, attrs):
        return super().validate({"name": "draft", **attrs})


class RuleVersionSerializer(serializers.ModelSerializer):
    snapshot = serializers.DictField(help_text="Every field of the rule as this version had it.")

    class Meta:
        model = ApprovalRuleVersion
        fields = ["rule_key", "version", "change", "snapshot", "changed_by_name", "changed_at"]


class PreviewExampleSerializer(serializers.Serializer):
    tool = serializers.CharField()
    args_hash = serializers.CharField(help_text="The first characters of the call's argument hash.")
    run_id = serializers.IntegerField()


class RulePreviewSerializer(serializers.Serializer):
    considered = serializers.IntegerField(help_text="Destructive calls looked at: the newest, at most 1,000.")
    matched = serializers.IntegerField()
    approve = serializers.IntegerField(help_text="Would be approved automatically.")
    blocked_by_safeguards = serializers.IntegerField(
        help_text="The rule says approve, but a safeguard (outcome unknown, unseen identifier, always-ask tool) "
        "sends the call to a person."
    )
    reject = serializers.IntegerField()
    ask_two = serializers.IntegerField()
    ask_group = serializers.IntegerField()
    ask_quorum = serializers.IntegerField()
    ask = serializers.IntegerField()
    not_matched = serializers.IntegerField()
    unreadable = serializers.IntegerField(help_text="Calls whose arguments are not JSON (never matched).")
    examples = PreviewExampleSerializer(many=True)


class ShadowVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    seen = serializers.IntegerField(help_text="Live calls this version would have decided.")
    agreed = serializers.IntegerField()
    disagreed = serializers.IntegerField()
    agreement_percent = serializers.IntegerField(allow_null=True, help_text="Of the calls both it and a person decided.")
    left_to_people = serializers.IntegerField(help_text="It would have asked people, or a safeguard would have.")
    decided_otherwise = serializers.IntegerField(help_text="Decided automatically by something else.")
    undecided = serializers.IntegerField(help_text="Still waiting, expired, or closed with their run.")
    outcomes = serializers.DictField(child=serializers.IntegerField())


class ShadowDisagreementSerializer(serializers.Serializer):
    approval = serializers.IntegerField()
    run = serializers.IntegerField()
    tool = serializers.CharField()
    args_hash = serializers.CharField()
    rule_version = serializers.IntegerField()
    would = serializers.CharField()
    would_words = serializers.CharField()
    detail = serializers.CharField()
    people = serializers.CharField()
    decided_by = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)


class ShadowReportSerializer(serializers.Serializer):
    versions = ShadowVersionSerializer(many=True)
    disagreements = ShadowDisagreementSerializer(many=True, help_text="The newest 50.")

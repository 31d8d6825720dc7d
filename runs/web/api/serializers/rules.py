"""Approval rules in the API. The fields read the input; rule_errors (runs.supervision.rules.changes)
holds every rule on what a rule may be, shared with the dashboard's editor."""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apikit.fields import (
    NameRelatedField,
    choice,
    fields_scoped,
    people_scoped,
    person_in_project,
    project_chosen,
    project_field,
    service_errors,
)
from apikit.strict import KnownFieldsOnly
from projects.models import Project
from runs.models import Agent, ApprovalRule, ApprovalRuleVersion
from runs.supervision.rules.backtest import KIND_WORDS
from runs.supervision.rules.changes import RULE_FIELDS, rule_create, rule_errors, rule_update
from runs.supervision.rules.conditions import OPERATORS
from runs.supervision.rules.saved_over import saved_over_check, saved_over_needed

MAX_SET_RULES = 500
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
    confirm_saved_over = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, write_only=True, max_length=1_000_000,
        help_text="The approval ids of the calls people rejected that this rule would have approved (the 409's "
        "saved_over), confirmed after reading them: the save goes through only when they are exactly the calls "
        "it would approve over a rejection now, and its version records them.",
    )

    class Meta:
        model = ApprovalRule
        fields = ["id", "project", *RULE_FIELDS, "launched_by_unresolved", "version", "updated_by_name", "created_at",
                  "updated_at", "confirm_saved_over"]
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
        self.confirmed = attrs.pop("confirm_saved_over", None)
        self.project = project_chosen(self, attrs, "runs.add_approvalrule")
        person_in_project(self, attrs, "launched_by", self.project)
        errors = rule_errors(rule=self.instance, data=attrs, project=self.project)
        if errors:
            raise service_errors(errors)
        return attrs

    def create(self, validated_data):
        # Raises SavedOverUnconfirmed (the view's 409) for calls people rejected, unless confirmed.
        calls = saved_over_needed(validated_data, rule=None, project_id=self.project.pk)
        return rule_create(data=validated_data, user=self.context["request"].user, project=self.project,
                           saved_over=saved_over_check(calls, self.confirmed))

    def update(self, instance, validated_data):
        calls = saved_over_needed(validated_data, rule=instance, project_id=instance.project_id)
        return rule_update(rule=instance, data=validated_data, user=self.context["request"].user,
                           saved_over=saved_over_check(calls, self.confirmed))


class RuleDraftSerializer(RuleSerializer):
    """A rule to preview: every field may be left out (a new rule's defaults apply)."""

    confirm_saved_over = None  # nothing is saved

    class Meta(RuleSerializer.Meta):
        fields = [name for name in RuleSerializer.Meta.fields if name != "confirm_saved_over"]
        extra_kwargs = {**RuleSerializer.Meta.extra_kwargs, "name": {"allow_blank": True, "required": False}}

    def validate(self, attrs):
        return super().validate({"name": "draft", **attrs})


class RuleVersionSerializer(serializers.ModelSerializer):
    snapshot = serializers.DictField(help_text="Every field of the rule as this version had it.")
    saved_over = serializers.SerializerMethodField()

    class Meta:
        model = ApprovalRuleVersion
        fields = ["rule_key", "version", "change", "snapshot", "changed_by_name", "changed_at", "saved_over"]

    @extend_schema_field(serializers.ListField(child=serializers.DictField(), help_text=(
        "The calls people rejected that this version would have approved, as its saver confirmed them "
        "({approval, run, tool, person}); [] for most versions.")))
    def get_saved_over(self, version) -> list:
        return version.saved_over or []


class SavedOverCallSerializer(serializers.Serializer):
    approval = serializers.IntegerField()
    run = serializers.IntegerField()
    tool = serializers.CharField()
    person = serializers.CharField(help_text="Who rejected it.")


class BacktestDisagreementSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(KIND_WORDS), help_text="; ".join(f"{k}: {w}" for k, w in KIND_WORDS.items()))
    words = serializers.CharField()
    approval = serializers.IntegerField()
    run = serializers.IntegerField()
    tool = serializers.CharField()
    args_hash = serializers.CharField()
    arguments = serializers.CharField(help_text="Compact JSON, the tool's sensitive fields masked.")
    would = serializers.CharField(help_text="What the rule set would have done, in words.")
    person = serializers.CharField()
    person_decision = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()
    evidence = serializers.DictField(help_text="The card's evidence: the model's words (said), previews of what it "
                                     "had just read (read), where each value came from (values); masked as stored.")


class BacktestSerializer(serializers.Serializer):
    days = serializers.IntegerField(help_text="The window: the calls asked about in the last days (BACKTEST_DAYS).")
    since = serializers.DateTimeField()
    considered = serializers.IntegerField(help_text="Calls a person decided (each once: a call asked again after a "
                                          "crash by its newest approval).")
    agreed = serializers.IntegerField()
    agreed_approved = serializers.IntegerField()
    agreed_rejected = serializers.IntegerField()
    left_to_people = serializers.IntegerField(help_text="The set would have asked people, as happened.")
    held_by_safeguard = serializers.IntegerField(help_text="Of those: an approval a safeguard holds back.")
    disagreed = serializers.IntegerField()
    approved_rejected = serializers.IntegerField(help_text="Would have approved what a person rejected.")
    approved_edited = serializers.IntegerField(help_text="Would have approved a call a person edited first.")
    rejected_approved = serializers.IntegerField(help_text="Would have rejected what a person approved.")
    automatic = serializers.IntegerField(help_text="Decided automatically then (a rule, a grant, a policy): apart.")
    undecided = serializers.IntegerField(help_text="No person decided (waiting, expired, closed): apart.")
    unreadable = serializers.IntegerField()
    rules = serializers.ListField(child=serializers.DictField(), help_text="Each rule of the set in the order tried "
                                  "({label, name, decided}): the calls it was the first to match.")
    disagreements = BacktestDisagreementSerializer(many=True, help_text="At most 50, the harmful first, newest first.")
    rejected_over = SavedOverCallSerializer(many=True, help_text="Every call a person rejected that it would approve.")
    not_replayed = serializers.CharField()


class RuleSetBacktestRequestSerializer(KnownFieldsOnly, serializers.Serializer):
    project = serializers.SlugRelatedField(slug_field="slug", queryset=Project.objects.all(),
                                           help_text="The project's slug: its calls, by its people.")
    rules = serializers.ListField(child=serializers.DictField(), max_length=MAX_SET_RULES, help_text=(
        "The rule set as drafted, in the order tried (first match wins; positions aside): each a rule's fields as "
        "for creating one. A rule disabled or in shadow decides nothing and is left out."))


class RuleSetBacktestSerializer(BacktestSerializer):
    left_out = serializers.ListField(child=serializers.IntegerField(), help_text="Indexes of rules disabled or in shadow.")


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
    backtest = BacktestSerializer(help_text="The rule, as a new rule in its project's set, beside what people decided.")


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

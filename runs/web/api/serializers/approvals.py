"""Approvals in the API: the pending queue, a decision and its answer, bulk decisions, grants."""
import json

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from apikit.fields import choice
from apikit.strict import KnownFieldsOnly
from hosting.text import MAX_SAFE_INTEGER
from runs.engine.storage.text import storable_text
from runs.models import Approval, ArchivedApproval
from runs.supervision.approvals.bulk_decisions import MAX_BULK
from runs.supervision.approvals.checks import GRANT_SCOPES, MAX_EDIT_CHARS

REASON_CHARS = 2000
MAX_CONFIRMED = 1000  # twins named at once: the selection's, and theirs waiting or decided in the window


class TextField(serializers.CharField):
    """Free text the database can store (DRF already refuses NUL; this also unpaired surrogates)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not storable_text(value):
            raise serializers.ValidationError("Contains an unpaired surrogate character.")
        return value


@extend_schema_field({
    "oneOf": [{"type": "object", "additionalProperties": True}, {"type": "string", "maxLength": MAX_EDIT_CHARS}],
    "nullable": True,
})
class EditedArgumentsField(serializers.JSONField):
    """The operator's edit: a JSON object, or a string holding one; given to the service as text."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
        raise serializers.ValidationError("A JSON object, or a string holding one.")


@extend_schema_field({"type": "object", "additionalProperties": True, "nullable": True})
class MaskedArgumentsField(serializers.JSONField):
    """A call's arguments as a JSON object, sensitive values masked (the API's answers only)."""

    def __init__(self, **kwargs):
        super().__init__(allow_null=True, read_only=True, **kwargs)


class ApprovalBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = choice(Approval.Status.choices, "ApprovalStatus")
    decided_by = serializers.CharField(
        allow_null=True,
        help_text="Who decided: a person as named when they decided (kept after their account is deleted), or "
                  "\"rule 'X' v3\", \"a grant for this run\", \"the run's policy\", \"expiry\"; null while pending.",
    )
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    guidance = serializers.CharField(allow_blank=True, help_text="With a rejection: what the model should do instead.")
    automatic = serializers.BooleanField(help_text="Decided by a policy, a rule or a grant, not a person.")
    expires_at = serializers.DateTimeField(allow_null=True)
    rule_name = serializers.CharField(allow_null=True, help_text="The rule that decided or routed the call.")
    rule_version = serializers.IntegerField(allow_null=True)
    required_approvals = serializers.IntegerField(help_text="How many different people must approve (1 or 2).")
    approvals_given = serializers.IntegerField(help_text="Approvals counted so far: pending with 1 of 2.")
    edited = serializers.BooleanField(help_text="Approved with arguments an operator edited (pending: an edit is proposed).")
    edited_args_hash = serializers.CharField(allow_null=True, help_text="Hash of the edited arguments (the call's "
                                             "`args_hash` is the model's).")


TWIN_STATES = ["waiting", "approved", "running", "succeeded", "failed", "unknown", "rejected", "expired"]


class TwinSerializer(serializers.Serializer):
    approval = serializers.IntegerField(help_text="The twin's approval (its `id`).")
    run = serializers.IntegerField(help_text="The twin's run.")
    state = choice([(state, state) for state in TWIN_STATES], "TwinState",
                   help_text="Waiting for a person; approved (not run yet), running, or run (succeeded, failed, "
                             "outcome unknown); or rejected or expired in the window.")
    words = serializers.CharField(help_text='As the card says it: "also waiting in run 42", '
                                            '"ran 3 min ago in run 17: succeeded".')


class TwinConflictSerializer(serializers.Serializer):
    approvals = inline_serializer("TwinSelected", {
        "id": serializers.IntegerField(), "run": serializers.IntegerField(), "tool": serializers.CharField(),
    }, many=True, help_text="The approvals of the request that act on this one thing.")
    twins = TwinSerializer(many=True, help_text="The other calls on it: waiting, or decided in the window.")
    words = serializers.CharField(help_text='"#12 cancel_order in run 41 and #13 cancel_order in run 42 act on '
                                            'the same thing".')
    confirm = serializers.ListField(child=serializers.IntegerField(), help_text="The approval ids to name for it.")


class TwinsConflictSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="Nothing was decided: which calls act on the same thing.")
    twins = TwinConflictSerializer(many=True, help_text="One entry per thing acted on by more than one call.")
    twins_to_confirm = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Send these ids as `twins_confirmed` to approve anyway, knowing the twins.")


class ReadSerializer(serializers.Serializer):
    kind = choice([("tool", "tool"), ("operator", "operator")], "EvidenceReadKind",
                  help_text="A tool's result, or an operator's message.")
    text = serializers.CharField(allow_blank=True, help_text="The whole text, the tool's sensitive fields masked "
                                                            "(cut at 20,000 characters).")
    step = serializers.IntegerField(required=False)
    tool = serializers.CharField(required=False)
    call_pk = serializers.IntegerField(required=False)
    outside = serializers.BooleanField(required=False, help_text="The tool reads outside content (HTTP, MCP, marked).")
    chars = serializers.IntegerField(required=False, help_text="The result's length before any cut.")
    by = serializers.CharField(required=False, help_text="The operator who wrote it.")


class ValueSourceSerializer(serializers.Serializer):
    path = serializers.CharField(help_text='The value\'s place in the arguments: "$.order_id".')
    value = serializers.JSONField(help_text="The value (a string, number, boolean or null); ••••: a sensitive field.")
    source = choice([(s, s) for s in ("task", "operator", "tool", "memory", "system", "model")], "ValueSourceKind",
                    help_text="Where the run first saw it; model: nowhere (the model wrote it).")
    words = serializers.CharField(help_text='"from lookup_order\'s result at step 2", "the model wrote this".')
    tool = serializers.CharField(required=False)
    step = serializers.IntegerField(required=False)
    call_pk = serializers.IntegerField(required=False)
    before = serializers.CharField(required=False, allow_blank=True, help_text="Text around the value where it was "
                                   "seen (left out for a sensitive field).")
    match = serializers.CharField(required=False, allow_blank=True)
    after = serializers.CharField(required=False, allow_blank=True)
    outside = serializers.BooleanField(required=False, help_text="It came from outside content.")


class EvidenceSerializer(serializers.Serializer):
    said = serializers.CharField(allow_blank=True, help_text="The model's own words before the call.")
    read = ReadSerializer(many=True, help_text="What the model had just read before asking, newest first (at most 8).")
    values = ValueSourceSerializer(many=True, help_text="Where each value of the arguments came from, in order.")


class StateSerializer(serializers.Serializer):
    tool = serializers.CharField(required=False, help_text="The read-only tool that checked.")
    ok = serializers.BooleanField(required=False, help_text="false: the check failed (`error` says why); it never "
                                                            "blocks a decision.")
    summary = serializers.CharField(required=False, allow_blank=True, help_text='"ORD-1001: cancelled".')
    answer = serializers.CharField(required=False, allow_blank=True, help_text="Its whole answer, masked.")
    error = serializers.CharField(required=False, allow_blank=True)
    arguments = serializers.JSONField(required=False, help_text="What it was asked, masked.")
    checking = serializers.BooleanField(required=False, help_text="Asked again and not answered yet.")


class PendingApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    agent = serializers.CharField()
    task = serializers.CharField()
    tool = serializers.CharField()
    call_id = serializers.CharField()
    args_hash = serializers.CharField()
    arguments = MaskedArgumentsField(
        help_text="The arguments the model sent, as a JSON object; the value of each field the tool marks sensitive "
                  "is the string \"••••\". null when they are not a JSON object (`arguments_problem` says why)."
    )
    arguments_text = serializers.CharField(
        allow_blank=True, help_text="The same arguments as the queue shows them: indented, one field a line, "
                                    "sensitive values as ••••. For reading, not for parsing: use `arguments`."
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
    required_approvals = serializers.IntegerField(help_text="Different people who must approve (1 or 2).")
    approvals_given = serializers.IntegerField()
    voters = serializers.ListField(child=serializers.CharField(),
                                   help_text="Who approved the arguments as they stand (the proposed edit's, if any), in order.")
    proposed_arguments = MaskedArgumentsField(
        help_text="An edit a person proposed, as a JSON object masked like `arguments` (null when none): it needs "
                  "every approval again, and runs instead of the model's arguments once approved.")
    proposed_arguments_text = serializers.CharField(
        allow_null=True, help_text="The proposed edit as the queue shows it (like `arguments_text`); null when none.")
    proposed_args_hash = serializers.CharField(allow_null=True, help_text="Hash of the proposed edit: send it as "
                                               "`args_hash` to approve it.")
    proposed_by = serializers.CharField(allow_null=True, help_text="Who proposed the edit.")
    group = serializers.CharField(allow_null=True, help_text="Only members of this group may decide.")
    rule_name = serializers.CharField(allow_null=True, help_text="The rule that sent the call to people.")
    rule_version = serializers.IntegerField(allow_null=True)
    allow_edits = serializers.BooleanField(help_text="The tool allows editing the arguments before approving.")
    parameters = serializers.JSONField(help_text="The tool's JSON schema, which an edit must satisfy.")
    # The card's evidence (issue 47), as stored when the call was asked about: masked there.
    evidence = EvidenceSerializer(help_text="What the model said and had just read, and where each value came from "
                                            "(empty lists when not recorded).")
    outside_paths = serializers.ListField(child=serializers.CharField(),
                                          help_text='Argument paths whose value came from outside content ("$.email").')
    state = StateSerializer(help_text="The tool's state check's answer ({} when the tool names none).")
    state_checked_at = serializers.DateTimeField(allow_null=True, help_text="When the state check answered.")
    twins = TwinSerializer(many=True, help_text="Other calls of this project on the same thing (same tool and "
                                                "identifying arguments), waiting or decided in the window.")


def twins_confirmed_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_SAFE_INTEGER), required=False,
        max_length=MAX_CONFIRMED,
        help_text="The approvals you know act on the same thing (twins), by id: approving calls that have twins "
                  "together (in bulk, or with a grant) is refused with 409, naming them, unless every one is listed.")


class DecisionSerializer(KnownFieldsOnly, serializers.Serializer):
    reason = TextField(required=False, allow_blank=True, max_length=REASON_CHARS)


class ApproveSerializer(DecisionSerializer):
    arguments = EditedArgumentsField(
        required=False, allow_null=True,
        help_text="Edited arguments to run the call with instead (a JSON object, or a string holding one); "
                  "checked against the tool's schema. On a call that needs several approvals an edit "
                  "counts as one and needs them all again, on the edited arguments.",
    )
    args_hash = serializers.CharField(
        required=False, allow_blank=True, max_length=64,
        help_text="The hash of the arguments you approve as you saw them: the call's `args_hash`, or a "
                  "`proposed_args_hash`, which is required to approve a proposed edit.",
    )
    grant = choice([(scope, scope or "none") for scope in GRANT_SCOPES], "GrantScope", required=False,
                   help_text='Also approve, for the rest of this run, "identical" calls (same tool and '
                             'arguments hash) or every call of the "tool". A call with twins needs `twins_confirmed`.')
    twins_confirmed = twins_confirmed_field()


class RejectSerializer(DecisionSerializer):
    guidance = TextField(required=False, allow_blank=True, max_length=REASON_CHARS,
                         help_text="What the model should do instead; it receives this with the rejection.")


class BulkDecisionSerializer(KnownFieldsOnly, serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_SAFE_INTEGER), allow_empty=False,
        max_length=MAX_BULK, help_text=f"The approvals to decide, at most {MAX_BULK}.",
    )
    decision = choice([("approve", "approve"), ("reject", "reject")], "BulkDecision")
    reason = TextField(required=False, allow_blank=True, max_length=REASON_CHARS)
    twins_confirmed = twins_confirmed_field()


class BulkItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    detail = serializers.CharField()


class BulkOutcomeSerializer(serializers.Serializer):
    decided = ApprovalBriefSerializer(many=True, help_text="Decided now (a two-person call may show 1 of 2).")
    already = BulkItemSerializer(many=True, help_text="Decided before this request: by whom and when.")
    refused = BulkItemSerializer(many=True, help_text="Not decided: no such approval, or not yours to decide.")


class GrantSerializer(serializers.Serializer):
    grant_id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    tool = serializers.CharField()
    scope = choice([("identical", "identical"), ("tool", "tool")], "GrantKind")
    args_hash = serializers.CharField(allow_blank=True, help_text="Identical calls: their arguments hash; empty: every call.")
    by = serializers.CharField(help_text="Who gave the grant.")
    created_at = serializers.DateTimeField()
    source_approval_id = serializers.IntegerField(allow_null=True)
    revoked = serializers.BooleanField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoked_by = serializers.CharField(allow_null=True)


class GrantListSerializer(serializers.Serializer):
    results = GrantSerializer(many=True)


class GrantResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    grant = GrantSerializer()


class DecisionResultSerializer(serializers.Serializer):
    detail = serializers.CharField()
    approval = ApprovalBriefSerializer()
    grant = GrantSerializer(required=False, help_text="The grant given with this approval, if one was asked for.")


class DecisionConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    approval = ApprovalBriefSerializer(required=False, help_text="Already decided: the decision that stands.")
    twins = TwinConflictSerializer(many=True, required=False, help_text="Twins not confirmed: the calls on the same "
                                                                        "thing; nothing was decided.")
    twins_to_confirm = serializers.ListField(child=serializers.IntegerField(), required=False,
                                             help_text="Send these ids as `twins_confirmed` to approve anyway.")


class ArchivedApprovalSerializer(serializers.ModelSerializer):
    status = choice(Approval.Status.choices, "ApprovalStatus")
    voters = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="Who approved a call that needed several people, in order."
    )

    class Meta:
        model = ArchivedApproval
        fields = [
            "id", "approval_id", "run_id", "agent_name", "customer", "run_task", "tool_name", "call_id", "args_hash",
            "arguments", "call_status", "status", "note", "reason", "automatic", "decided_by_name", "rule_name",
            "rule_version", "required_approvals", "voters", "edited_arguments", "edited_args_hash", "guidance",
            "requested_at", "decided_at", "archived_at",
        ]
        extra_kwargs = {
            "arguments": {"help_text": "As the model sent them, fields the tool marks sensitive masked."},
            "rule_name": {"help_text": "The rule that decided or routed the call, as it was then; empty when none."},
            "rule_version": {"help_text": "That rule's version; null when no rule."},
            "edited_arguments": {"help_text": "The arguments an operator approved instead, sensitive fields masked; "
                                              "empty when not edited."},
            "edited_args_hash": {"help_text": "The hash of the edited arguments (what ran); empty when not edited."},
            "guidance": {"help_text": "With a rejection: what the model was told to do instead."},
        }


class ArchivedApprovalPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The next page, or null after the last one.")
    results = ArchivedApprovalSerializer(many=True)

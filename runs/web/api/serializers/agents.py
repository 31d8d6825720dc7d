"""Agents in the API. The fields read the input; agent_save (runs.lifecycle.agents) holds every rule."""
from django.core.validators import URLValidator
from rest_framework import serializers

from apikit.fields import NameRelatedField, choice, fields_scoped, project_chosen, project_field, service_errors
from apikit.strict import KnownFieldsOnly
from runs.lifecycle.agents import AGENT_FIELDS, MAX_ESCALATION_EMAILS_CHARS, agent_errors, agent_save
from runs.models import Agent, AgentVersion, ToolChoice
from toolsapp.models import Tool


class AgentSerializer(KnownFieldsOnly, serializers.ModelSerializer):
    model_list = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, help_text="Ordered model names; empty uses LLM_MODELS."
    )
    base_url = serializers.CharField(  # the validator is agent_save's rule too; here it gives the schema its format
        required=False, allow_blank=True, max_length=200, validators=[URLValidator(schemes=["http", "https"])],
        help_text="OpenAI-compatible endpoint (http or https); empty uses LLM_BASE_URL.",
    )
    tools = NameRelatedField(many=True, required=False, slug_field="name", queryset=Tool.objects.all())
    provider_options = serializers.DictField(required=False)
    project = project_field()
    verifier = serializers.CharField(required=False, allow_blank=True, max_length=100)
    first_tool_choice = choice(ToolChoice.choices, "ToolChoice", required=False)
    later_tool_choice = choice(ToolChoice.choices, "ToolChoice", required=False)
    escalation_emails = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_ESCALATION_EMAILS_CHARS,
        help_text="Who is e-mailed when an approval waits past escalate_after_seconds (comma separated); "
        "empty uses APPROVAL_ESCALATION_EMAILS.",
    )

    class Meta:
        model = Agent
        fields = ["id", "project", *AGENT_FIELDS, "version", "created_at", "updated_at"]
        read_only_fields = ["version", "created_at", "updated_at"]
        # The name's uniqueness is agent_save's rule (never looked up with text that cannot be stored).
        extra_kwargs = {"name": {"validators": []}}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        fields_scoped(self, "tools", shared=True)

    def validate(self, attrs):
        self.project = project_chosen(self, attrs, "runs.add_agent")
        errors = agent_errors(agent=self.instance, data=attrs, project=self.project)
        if errors:
            raise service_errors(errors)
        return attrs

    def create(self, validated_data):
        return agent_save(agent=None, data=validated_data, user=self._user(), project=self.project)

    def update(self, instance, validated_data):
        return agent_save(agent=instance, data=validated_data, user=self._user())

    def _user(self):
        request = self.context.get("request")
        return getattr(request, "user", None)


class AgentVersionSerializer(serializers.ModelSerializer):
    settings = serializers.DictField(help_text="Every setting of the agent at this version, its tools by name.")
    changed = serializers.ListField(child=serializers.CharField(), help_text="What it changed of the version before.")
    current = serializers.SerializerMethodField(help_text="Whether it is the agent's current version.")

    class Meta:
        model = AgentVersion
        fields = ["number", "current", "draft", "changed", "note", "settings", "created_by_name", "created_at"]

    def get_current(self, version) -> bool:
        return version.number == version.agent.version

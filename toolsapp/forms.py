"""The tool editor. The parameters schema is checked before anything is saved."""
import json
import re

from django import forms

from runs.services.guards import MAX_SAFE_INTEGER
from toolsapp.models import Tool
from toolsapp.registry import EXECUTORS, PYTHON_HANDLERS
from toolsapp.schemas import InvalidSchema, check_tool_schema

# What the chat completions API accepts as a function name.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolForm(forms.ModelForm):
    parameters = forms.CharField(
        label="Parameters (JSON Schema)",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        help_text='A Draft 2020-12 JSON Schema whose root is {"type": "object", ...}; only local $ref.',
    )
    sensitive_fields = forms.CharField(
        required=False, help_text="Comma separated argument names masked in the UI."
    )
    repeat_limit = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_SAFE_INTEGER,
        help_text="Identical calls allowed per run; empty uses the agent's.",
    )
    timeout_seconds = forms.FloatField(min_value=0.01, max_value=24 * 3600)

    class Meta:
        model = Tool
        fields = [
            "name", "description", "parameters", "destructive", "parallel_safe", "idempotent",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler", "enabled",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"kind": "Only Python handlers can be executed by this installation today."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.schema_warnings: list[str] = []
        if not self.is_bound:
            self.initial["parameters"] = json.dumps(
                self.initial.get("parameters") or {"type": "object", "properties": {}, "required": [],
                                                    "additionalProperties": False},
                indent=2, ensure_ascii=False,
            )
            self.initial["sensitive_fields"] = ", ".join(self.initial.get("sensitive_fields") or [])

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not TOOL_NAME.match(name):
            raise forms.ValidationError("Use 1-64 letters, digits, underscores or hyphens (the API's rule).")
        return name

    def clean_parameters(self):
        text = self.cleaned_data["parameters"]
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        try:
            self.schema_warnings = check_tool_schema(schema)
        except InvalidSchema as exc:
            raise forms.ValidationError(str(exc)) from None
        return schema

    def clean_sensitive_fields(self):
        return [part.strip() for part in self.cleaned_data["sensitive_fields"].split(",") if part.strip()]

    def notices(self) -> list[str]:
        """Things worth knowing after saving that do not stop the tool from being saved."""
        data = self.cleaned_data
        notices = [f"Strict mode: {warning}" for warning in self.schema_warnings]
        if data["kind"] not in EXECUTORS:
            notices.append(f"Tools of kind {data['kind']!r} cannot be executed by this installation yet.")
        elif data["kind"] == "python" and (data["handler"] or data["name"]) not in PYTHON_HANDLERS:
            notices.append(f"No Python handler named {data['handler'] or data['name']!r} is registered.")
        return notices

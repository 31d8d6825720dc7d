"""The tool editor. The parameters schema is checked before anything is saved."""
import json
import re

from django import forms

from runs.services.guards import MAX_SAFE_INTEGER
from toolsapp.executors import EXECUTORS
from toolsapp.executors.http import SECRET_ENV_PREFIX, http_tool_config
from toolsapp.executors.python import PYTHON_HANDLERS
from toolsapp.models import Tool
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
    url = forms.URLField(
        required=False, label="URL (HTTP tools)", assume_scheme="https",
        help_text="The worker POSTs the validated arguments and the idempotency key here as JSON. "
                  "Private and loopback addresses are refused unless OUTBOUND_ALLOWLIST names them.",
    )
    secret_env = forms.CharField(
        required=False, label="Secret from environment (HTTP tools)", max_length=100,
        help_text=f"Name of an environment variable starting with {SECRET_ENV_PREFIX}; its value is sent "
                  "as a Bearer token. The secret itself is never stored.",
    )

    class Meta:
        model = Tool
        fields = [
            "name", "description", "parameters", "destructive", "parallel_safe", "idempotent",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler", "url", "secret_env", "enabled",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"kind": "MCP tools are added by discovering an MCP server's tools."}

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
            config = self.instance.config or {}
            self.initial.setdefault("url", config.get("url", ""))
            self.initial.setdefault("secret_env", config.get("secret_env", ""))
        if self.instance.pk and self.instance.kind == Tool.Kind.MCP:
            # Where an MCP tool lives and what it is called there come from discovery.
            for name in ("kind", "name", "url", "secret_env", "handler"):
                self.fields[name].disabled = True
        else:
            self.fields["kind"].choices = [c for c in Tool.Kind.choices if c[0] != Tool.Kind.MCP]

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

    def clean(self):
        data = super().clean()
        if data.get("kind") == Tool.Kind.HTTP:
            config, problems = http_tool_config(url=data.get("url"), secret_env=data.get("secret_env"))
            for field, problem in problems.items():
                self.add_error(field, problem)
            self.instance.config = config
        return data

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

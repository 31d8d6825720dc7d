"""The tool editor: turns what was typed into values (the schema's JSON text, a comma list);
toolsapp.services owns the rules, so the form and the API refuse the same things."""
import json

from django import forms

from toolsapp.executors.http import SECRET_ENV_PREFIX
from toolsapp.models import Tool
from toolsapp.services import ToolInvalid, tool_validate
from toolsapp.text import JsonTooDeep
from toolsapp.text import loads as bounded_loads


class ToolForm(forms.ModelForm):
    parameters = forms.CharField(
        label="Parameters (JSON Schema)",
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        help_text='A Draft 2020-12 JSON Schema whose root is {"type": "object", ...}; only local $ref.',
    )
    sensitive_fields = forms.CharField(
        required=False, help_text="Comma separated argument names masked in the UI."
    )
    repeat_limit = forms.IntegerField(required=False, help_text="Identical calls allowed per run; empty uses the agent's.")
    timeout_seconds = forms.FloatField()
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
            "name", "description", "parameters", "destructive", "always_ask", "critical", "allow_argument_edits",
            "parallel_safe", "idempotent", "in_experiments",
            "timeout_seconds", "repeat_limit", "sensitive_fields", "kind", "handler", "url", "secret_env", "enabled",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"kind": "MCP tools are added by discovering an MCP server's tools."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The stored tool, before this form changes its instance: the rules compare with it.
        self.stored = self.instance if self.instance.pk else None
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
        # A form sent without it (a script, an older page) keeps what the tool has.
        self.fields["in_experiments"].required = False

    def clean_in_experiments(self):
        return self.cleaned_data["in_experiments"] or (self.stored.in_experiments if self.stored else "auto")

    def clean_parameters(self):
        text = self.cleaned_data["parameters"]
        try:
            return bounded_loads(text)
        except JsonTooDeep as exc:
            raise forms.ValidationError(f"Not accepted: {exc}.") from None
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None

    def clean_sensitive_fields(self):
        return [part.strip() for part in self.cleaned_data["sensitive_fields"].split(",") if part.strip()]

    def clean(self):
        data = super().clean()
        try:
            tool_validate(tool=self.stored, data=data)
        except ToolInvalid as exc:
            self.add_tool_errors(exc)
        return data

    def add_tool_errors(self, exc: ToolInvalid) -> None:
        """The service's errors on their fields; a field that already has an error (it could not
        even be read) keeps just that one."""
        for field, messages in exc.errors.items():
            if field in self.errors:
                continue
            for message in messages:
                self.add_error(field if field in self.fields else None, message)

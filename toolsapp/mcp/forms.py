from django import forms

from toolsapp.models import McpServer


class McpServerForm(forms.ModelForm):
    class Meta:
        model = McpServer
        fields = ["name", "transport", "command", "url", "enabled"]
        widgets = {"command": forms.Textarea(attrs={"rows": 2, "spellcheck": "false"})}

from django import forms

from toolsapp.mcp.services import stdio_change_refusal
from toolsapp.models import McpServer


class McpServerForm(forms.ModelForm):
    """`user` is who saves: only a superuser may register a stdio command the host's operator has
    not listed (toolsapp.mcp.services)."""

    user = None  # set per request (the views, and the admin's form class)

    class Meta:
        model = McpServer
        fields = ["name", "transport", "command", "url", "enabled"]
        widgets = {"command": forms.Textarea(attrs={"rows": 2, "spellcheck": "false"})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user or self.user
        self.stored = McpServer.objects.filter(pk=self.instance.pk).first() if self.instance.pk else None

    def clean(self):
        data = super().clean()
        refusal = stdio_change_refusal(
            stored=self.stored, transport=data.get("transport"), command=data.get("command") or "", user=self.user
        )
        if refusal and "command" not in self.errors:
            self.add_error("command", refusal)
        return data

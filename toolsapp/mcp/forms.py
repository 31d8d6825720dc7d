from django import forms

from toolsapp.forms import add_project_field, clean_project_field
from toolsapp.mcp.services import stdio_change_refusal
from toolsapp.models import McpServer


class McpServerForm(forms.ModelForm):
    """`user` is who saves: only a superuser may register a stdio command the host's operator has
    not listed (toolsapp.mcp.services). Given as an argument (the dashboard), it also offers the
    projects the person may put the server in (its discovered tools are that project's); the
    admin, for superusers, keeps a server's project as it is."""

    user = None  # set per request (the views, and the admin's form class)

    class Meta:
        model = McpServer
        fields = ["name", "transport", "command", "url", "enabled"]
        widgets = {"command": forms.Textarea(attrs={"rows": 2, "spellcheck": "false"})}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored = McpServer.objects.filter(pk=self.instance.pk).first() if self.instance.pk else None
        if user is not None:
            add_project_field(self, user, current=self.stored.project_id if self.stored else None,
                              adding=self.stored is None,
                              help_text="The team whose server it is: the tools discovered on it are that project's.")
        self.user = user or self.user

    def clean_project(self):
        return clean_project_field(self, self.user, self.stored.project_id if self.stored else None)

    def clean(self):
        data = super().clean()
        refusal = stdio_change_refusal(
            stored=self.stored, transport=data.get("transport"), command=data.get("command") or "", user=self.user
        )
        if refusal and "command" not in self.errors:
            self.add_error("command", refusal)
        if "project" in self.fields and "project" in data:
            self.instance.project = data["project"]  # not a Meta field: the admin keeps it as it is
        return data

"""The audit log's page for administrators, with filters, and its JSONL export (the same filters)."""
import json

from django import forms
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.decorators import login_required, user_passes_test
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from audit.models import AuditEntry

PERM_VIEW_AUDIT = "audit.view_auditentry"


def _reads_audit(user) -> bool:
    """The log is the site's (every project's changes, sign-ins, tokens): read by people who hold
    the permission site-wide (a role group, or superusers), not through a role in one project."""
    if not user.is_authenticated:
        return False
    if user.is_superuser or ModelBackend().has_perm(user, PERM_VIEW_AUDIT):
        return True
    raise PermissionDenied
PAGE_SIZE = 50
EXPORT_FIELDS = ("at", "actor_name", "actor_id", "via", "address", "action", "kind", "object_id", "object_repr",
                 "before", "after", "detail")


class AuditFilter(forms.Form):
    who = forms.CharField(required=False, max_length=150, label="Who", help_text="A username (exact).")
    kind = forms.ChoiceField(required=False, label="What")
    action = forms.ChoiceField(required=False, choices=[("", "any")] + AuditEntry.Action.choices)
    text = forms.CharField(required=False, max_length=200, label="Name contains")
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        kinds = AuditEntry.objects.order_by("kind").values_list("kind", flat=True).distinct()
        self.fields["kind"].choices = [("", "anything")] + [(k, k) for k in kinds]

    def entries(self):
        rows = AuditEntry.objects.all()
        if not self.is_valid():
            return rows.none()
        data = self.cleaned_data
        if data["who"]:
            rows = rows.filter(actor_name=data["who"].strip())
        if data["kind"]:
            rows = rows.filter(kind=data["kind"])
        if data["action"]:
            rows = rows.filter(action=data["action"])
        if data["text"]:
            rows = rows.filter(object_repr__icontains=data["text"])
        if data["since"]:
            rows = rows.filter(at__date__gte=data["since"])
        if data["until"]:
            rows = rows.filter(at__date__lte=data["until"])
        return rows


@login_required
@user_passes_test(_reads_audit)
@require_GET
def audit_list(request):
    form = AuditFilter(request.GET or None)
    page = Paginator(form.entries() if request.GET else AuditEntry.objects.all(), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "audit/audit_list.html", {
        "form": form, "page_obj": page, "entries": [(e, changes(e)) for e in page.object_list],
        "query": query.urlencode(),
    })


@login_required
@user_passes_test(_reads_audit)
@require_GET
def audit_export(request):
    form = AuditFilter(request.GET or None)
    rows = form.entries() if request.GET else AuditEntry.objects.all()

    def lines():
        for row in rows.values(*EXPORT_FIELDS).iterator(chunk_size=500):
            yield json.dumps(row, cls=DjangoJSONEncoder, ensure_ascii=False) + "\n"

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = 'attachment; filename="audit.jsonl"'
    return response


def changes(entry: AuditEntry) -> list[tuple[str, str | None, str | None]]:
    """(field, before, after) in words for the page; None where the entry has no such side (a
    creation has no before, a deletion no after)."""
    names = list(dict.fromkeys([*entry.before, *entry.after]))
    return [(name, _text(entry.before, name), _text(entry.after, name)) for name in names]


def _text(values: dict, name: str) -> str | None:
    if name not in values:
        return None
    value = values[name]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

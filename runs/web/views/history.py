from django.contrib.auth.decorators import login_required, permission_required
from django.shortcuts import redirect, render
from django.urls import reverse

from hosting.replica import reads_from_replica
from runs.lifecycle.run_list import history_filter_suggestions, run_history, run_history_page
from runs.roles import PERM_VIEW
from runs.web.forms.filters import HistoryFilterForm
from runs.web.history_rows import history_cells


@login_required
def home(request):
    return redirect("run_list")


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@reads_from_replica  # slightly stale is fine here (hosting/replica.py)
def run_list(request):
    form = HistoryFilterForm(request.GET, user=request.user)
    page = None
    suggestions = history_filter_suggestions(form.projects)  # offered while typing, and what a part of a name matches
    if form.is_valid():
        page = run_history_page(run_history(**form.filters(), known=suggestions), number=_page_number(request.GET.get("page")))
        history_cells(page.runs)
    return render(
        request,
        "runs/run_list.html",
        # The runs' links as one prefix: a {% url %} per row and column cost more than the rest of the row.
        {"form": form, "page": page, "runs_url": reverse("run_list"), "filtered": _filters_set(request.GET),
         "export_query": _without_page(request.GET), **suggestions},
    )


def _filters_set(query) -> int:
    """How many filters the query sets (the page number is none)."""
    return sum(1 for key, value in query.items() if key != "page" and value)


def _without_page(query) -> str:
    """The filters of this page as a query string, for the export links (all pages, not this one)."""
    query = query.copy()
    query.pop("page", None)
    return query.urlencode()


def _page_number(raw: str | None) -> int:
    try:
        return max(1, int(raw or 1))
    except ValueError:
        return 1

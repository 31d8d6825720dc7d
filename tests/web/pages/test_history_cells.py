"""The history table's cells written in Python read exactly as the template filters wrote them."""
from datetime import UTC, datetime

import pytest
from django.template import Context, Template

from runs.models import Run
from runs.web.history_rows import history_cells

FILTERS = Template(
    "{{ run.created_at|date:'c' }}|{{ run.created_at|date:'Y-m-d H:i T' }}|{{ run.active_seconds|stringformat:'.1f' }} s|"
    "{{ run.total_tokens|floatformat:'0g' }}|${{ run.cost_usd|floatformat:4 }}"
)


@pytest.mark.parametrize("cost", [0.0, 0.00005, 0.00125, 0.00015, 1.23456, 12345.6789, 0.1 + 0.2])
@pytest.mark.parametrize("seconds", [0.0, 0.05, 0.25, 12.349, 3600.0])
@pytest.mark.parametrize("tokens", [(0, 0), (999, 1), (1_234_000, 567)])
def test_the_cells_match_the_template_filters(cost, seconds, tokens, settings):
    settings.TIME_ZONE = "Europe/Berlin"  # not UTC: the zone's name and the local time matter
    run = Run(created_at=datetime(2026, 12, 3, 9, 8, 45, 123456, tzinfo=UTC), active_seconds=seconds,
              tokens_in=tokens[0], tokens_out=tokens[1], cost_usd=cost)
    run.calls_rejected = run.calls_edited = 0  # as runs_for_listing counts them
    expected = FILTERS.render(Context({"run": run}))
    history_cells([run])
    assert "|".join([run.created_iso, run.created_text, run.duration_text, run.tokens_text, run.cost_text]) == expected

"""Template tags of the metrics page."""

from django import template
from django.template.defaultfilters import floatformat
from django.utils.dates import MONTHS_3, WEEKDAYS_ABBR
from django.utils.formats import number_format
from django.utils.html import format_html_join

register = template.Library()


@register.simple_tag
def tokens_per_day_rows(bars: list[dict]) -> str:
    """One bar row per day of "Tokens and cost per day" (a year is 365 rows), as the filters
    date:"Y-m-d", date:"D d M" and floatformat:"0g" would write them: those filters cost 50 ms for
    a year of rows (each date format looks up its translations again); the names of the days and
    months are translated once here."""
    weekdays = {n: str(name) for n, name in WEEKDAYS_ABBR.items()}
    months = {n: str(name).title() for n, name in MONTHS_3.items()}
    return format_html_join(
        "\n",
        '<div class="bar-row" data-day="{}" data-tokens="{}" data-cost="{}">'
        '<span class="mono">{}</span>'
        '<div class="bar-track" title="{} runs"><span class="bar" style="width: {}%"></span></div>'
        '<span class="num">{}</span><span class="num">${}</span></div>',
        (
            (
                bar["label"].isoformat(),
                bar["item"].tokens,
                f"{bar['item'].cost_usd:.6f}",
                f"{weekdays[bar['label'].weekday()]} {bar['label'].day:02d} {months[bar['label'].month]}",
                bar["item"].runs,
                bar["width"],
                number_format(int(bar["item"].tokens), 0, force_grouping=True),
                floatformat(bar["item"].cost_usd, 4),
            )
            for bar in bars
        ),
    )

"""A card's evidence as HTML, written in Python: the queue shows up to 50 cards, each with up to 8
results and many values, and the template engine spent more time on these few lists than on the
rest of the page (bench/decision_pages.py). The markup is the one _card_evidence.html had;
every value is escaped (format_html, escape)."""
from django import template
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from runs.templatetags.approval_display import reported_states, states_marked

register = template.Library()


def _cut(text: str, limit: int) -> str:
    """Django's truncatechars (`limit` characters, the last an ellipsis), without its Unicode
    normalisation: these are previews of stored JSON and words."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _read_entry(r: dict, run_url: str) -> str:
    text, kind, step = str(r.get("text") or ""), r.get("kind"), r.get("step")
    if kind == "operator":
        source = format_html('<span class="read-source">{}\'s message</span>', r.get("by") or "an operator")
        label = "The whole message"
        whole = escape(text)
    else:
        source = format_html('<span class="read-source mono">{}</span>', r.get("tool") or "")
        label = f"{r.get('tool') or ''}'s whole result"
        whole = states_marked(text) if kind == "tool" else escape(text)
    marks = "".join(format_html(' <mark class="read-state">{}</mark>', s) for s in reported_states(text))
    outside = ' <span class="badge-outside">outside content</span>' if r.get("outside") else ""
    pk = format_html(' data-call-pk="{}"', r["call_pk"]) if r.get("call_pk") else ""
    cut = (format_html('<p class="muted">The first {} of {} characters.</p>', len(text), r["chars"])
           if isinstance(r.get("chars"), int) and r["chars"] > len(text) else "")
    return format_html(
        '<li class="read-entry read-{}"{}><details><summary>{} <span class="muted read-step">step {}</span>{}{} '
        '<span class="read-preview mono">{}</span></summary>'
        '<pre class="read-whole mono" tabindex="0" aria-label="{}">{}</pre>'
        '<p class="muted"><a href="{}#step-{}">Step {} on the run page</a></p>{}</details></li>',
        kind, mark_safe(pk), source, step, mark_safe(outside), mark_safe(marks), _cut(text, 140),
        label, whole, run_url, step, step, cut,
    )


def _shown(value) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return _cut(str(value), 200)


def _value_entry(v: dict) -> str:
    outside = ' <span class="badge-outside">from outside content</span>' if v.get("outside") else ""
    context = (format_html('<div class="value-context mono">{}<mark>{}</mark>{}</div>',
                           v.get("before", ""), v["match"], v.get("after", "")) if v.get("match") else "")
    return format_html(
        '<li class="value-source source-{}" data-path="{}" data-source="{}"><span class="mono value-path">{}</span> '
        '<span class="mono value-shown">{}</span> — <span class="value-words">{}</span>{}{}</li>',
        v.get("source", ""), v.get("path", ""), v.get("source", ""), v.get("path", ""), _shown(v.get("value")),
        v.get("words", ""), mark_safe(outside), context,
    )


@register.simple_tag
def card_evidence(item) -> str:
    """What the model had just read and where each argument value came from, for one card."""
    ev, pk = item.evidence or {}, item.approval.pk
    read, values = ev.get("read") or [], ev.get("values") or []
    if not read and not values:
        return ""
    parts = [format_html('<section class="evidence" aria-label="Evidence for #{}" data-outside-paths="{}">',
                         pk, " ".join(item.outside_paths or ()))]
    if read:
        run_url = reverse("run_detail", args=[item.run.pk])
        newest = ' <span class="muted">(newest first)</span>' if len(read) > 1 else ""
        parts.append(format_html('<h3 class="evidence-title" id="read-title-{}">What the model had just read{}</h3>'
                                 '<ol class="evidence-read" aria-labelledby="read-title-{}">', pk, mark_safe(newest), pk))
        parts += [_read_entry(r, run_url) for r in read]
        parts.append("</ol>")
    if values:
        parts.append(format_html('<h3 class="evidence-title" id="values-title-{}">Where each value came from</h3>'
                                 '<ul class="evidence-values" aria-labelledby="values-title-{}">', pk, pk))
        parts += [_value_entry(v) for v in values]
        parts.append("</ul>")
        left = ev.get("values_left_out")
        if left:
            parts.append(format_html('<p class="muted">{} more value{} not traced; rules count {} as from outside '
                                     'content.</p>', left, "" if left == 1 else "s", "it" if left == 1 else "them"))
    parts.append("</section>")
    return mark_safe("".join(str(p) for p in parts))

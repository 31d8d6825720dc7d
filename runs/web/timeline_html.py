"""The run page's timeline as HTML, rendered by the server with the page: what a person sees
without JavaScript, and what the live script takes over (it rebuilds the same from the events).

Plain Python, not a template: the page renders every step and call of the run, and the template
language cost several times the queries for a run of a dozen steps. Every value goes through
`escape`; the class names and data attributes are the ones run_live.js writes.
"""
import json

from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from hosting.text import loads as bounded_loads
from runs.lifecycle.call_labels import call_label
from runs.lifecycle.run_marks import status_label
from runs.models import Approval, ToolCall

PREVIEW_CHARS = 300
SHORT_JSON_CHARS = 600  # at most 300 levels deep: json.loads without the depth scan


def pretty_json(text: str) -> str | None:
    """`text` indented when it is a whole JSON object or array (what a reader without the tree of
    static/js/json_tree.js reads), else None: a cut preview or plain words stay as they are."""
    stripped = (text or "").strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        # A preview (300 characters) cannot nest deeper than Python's parser copes with: only a
        # longer text (an answer) is scanned for its depth first, which costs more than the parse.
        value = json.loads(stripped) if len(stripped) <= SHORT_JSON_CHARS else bounded_loads(stripped)
    except ValueError:
        return None
    return json.dumps(value, indent=2, ensure_ascii=False)


def label_html(label: dict) -> str:
    """A call's name as every page writes it (runs/lifecycle/call_labels.py): tool, arguments, step."""
    step = f' <span class="call-step muted">· {escape(label["step"])}</span>' if label["step"] else ""
    return (f'<span class="call-label"><span class="call-tool mono">{escape(label["tool"])}</span>'
            f'<span class="call-args-short mono">{escape(label["arguments"])}</span>{step}</span>')


def tree_source(text: str, *, name: str, classes: str, indented: bool = False) -> str:
    """A <pre> of `text` that json_tree.js turns into a tree when it is JSON (indented here for
    readers without JavaScript); `name` says what it is, for the tree's buttons. `indented`: the
    text is the arguments as runs/lifecycle/call_arguments.py shows them, indented JSON already
    (or a note that it is not JSON, or a cut, which the script leaves as text): not parsed again."""
    if indented:
        looks_like_json = text[:1] in ("{", "[") and text.rstrip()[-1:] in ("}", "]")
        pretty = text if looks_like_json else None
    else:
        pretty = pretty_json(text)
    attribute = f' data-json-tree="{escape(name)}"' if pretty is not None else ""
    return f'<pre class="{classes}"{attribute}>{escape(pretty if pretty is not None else text)}</pre>'


def tokens_text(step) -> str:
    """A step's tokens, with the cached part of its input and the reasoning part of its output."""
    tokens_in = f"{step.tokens_in} in" + (f" ({step.tokens_cached} cached)" if step.tokens_cached else "")
    tokens_out = f"{step.tokens_out} out" + (f" ({step.tokens_reasoning} reasoning)" if step.tokens_reasoning else "")
    return f"{tokens_in} / {tokens_out} tokens"


def request_text(step) -> str:
    return f"request ~{step.context_tokens} tokens, of which tool definitions ~{step.tool_definition_tokens}"


def compacted_text(call_ids: list) -> str:
    shown = ", ".join(map(str, call_ids[:8])) + (f" and {len(call_ids) - 8} more" if len(call_ids) > 8 else "")
    what = "result" if len(call_ids) == 1 else "results"
    return (f"{len(call_ids)} older {what} sent as a summary to fit the context budget (whole here and in the "
            f"journal; the model can read them again): {shown}")


def _when(moment, form: str = "%Y-%m-%d %H:%M:%S") -> str:
    """"2026-12-03 09:08:45 UTC" in the server's zone (Django's "Y-m-d H:i:s T"), written with
    strftime: this runs for every step of the page, and Django's date format cost 0.1 ms a call."""
    if not moment:
        return ""
    local = timezone.localtime(moment)
    return f"{local.strftime(form)} {local.tzname() or ''}"


def _step_time(moment) -> str:
    if not moment:
        return ""
    return (f'<time class="step-time muted" datetime="{moment.isoformat()}" title="{escape(_when(moment))}">'
            f'{escape(_when(moment, "%H:%M:%S"))}</time>')


def _approval(call: ToolCall) -> str:
    approval = call.approval
    if approval is None:
        return ""
    status = escape(approval.status)
    if approval.status == Approval.Status.PENDING:
        link = reverse("approval_detail", args=[approval.pk])
        text = f'Waiting for approval — <a href="{escape(link)}">open the approval queue</a>'
    else:
        decider = approval.decider
        text = escape(approval.get_status_display())
        if decider:
            text += f" by {escape(decider)}"
        if approval.reason:
            text += f": {escape(approval.reason)}"
    return f'<div class="call-approval approval-{status}" data-approval-status="{status}">{text}</div>'


def _edit(call: ToolCall) -> str:
    edit = call.shown["edit"]
    if not edit:
        return ""
    head = f"Edited by {escape(edit['by'] or 'an operator')}"
    if call.approval is not None and call.approval.decided_at:
        head += f" · {escape(_when(call.approval.decided_at))}"
    parts = [f'<div class="call-edit"><p class="call-edit-head">{head}</p>']
    if edit["note"]:
        parts.append(f'<p class="call-edit-note muted">Note: {escape(edit["note"])}</p>')
    if edit["changes"]:
        rows = "".join(
            f'<tr data-field="{escape(c["field"])}"><td class="mono">{escape(c["field"])}</td>'
            f'<td class="mono edit-asked">{escape(c["asked"] or "(not there)")}</td>'
            f'<td class="mono edit-ran">{escape(c["ran"] or "(removed)")}</td></tr>'
            for c in edit["changes"]
        )
        parts.append(
            '<table class="call-edit-changes"><thead><tr><th scope="col">Field</th><th scope="col">The model asked</th>'
            f'<th scope="col">Ran with</th></tr></thead><tbody>{rows}</tbody></table>'
        )
    ran = tree_source(edit["ran_with"], name=f"the arguments that ran of {call.tool_name}", classes="mono", indented=True)
    parts.append(f'<details class="call-edit-ran"><summary>Arguments that ran</summary>{ran}</details></div>')
    return "".join(parts)


def _result(call: ToolCall) -> str:
    """The result as the model read it: a tree when the preview is the whole JSON, else the preview."""
    whole = len(call.result_text) <= PREVIEW_CHARS
    shown = call.result_text[:PREVIEW_CHARS]
    cut = "" if whole else (f' <span class="call-result-cut">(the first {PREVIEW_CHARS} of {len(call.result_text)} '
                            'characters)</span>')
    return (f'<details class="call-result" open><summary>Result{cut}</summary>'
            f'{tree_source(shown, name=f"the result of {call.tool_name}", classes="call-preview mono")}</details>')


def _call(call: ToolCall, step_index: int) -> str:
    status = escape(call.status)
    short = escape(call.args_hash[:12])
    title = f"arguments hash {escape(call.args_hash)}"
    label = call_label(tool=call.tool_name, arguments=call.shown["arguments"], step=step_index)
    arguments = tree_source(call.shown["arguments"], name=f"the arguments of {call.tool_name}",
                            classes="call-args-json mono", indented=True)
    line = [
        label_html(label),
        f'<span class="call-status status status-{status}" data-status="{status}">{escape(call.get_status_display())}</span>',
    ]
    if call.latency_ms is not None:
        line.append(f'<span class="call-latency muted">{round(call.latency_ms)} ms</span>')
    if call.truncated:
        line.append('<span class="call-truncated flag-unseen" title="the model was sent a shortened result">truncated</span>')
    parts = [
        f'<li class="call" data-call-pk="{call.pk}" data-call-id="{escape(call.call_id)}" data-status="{status}">',
        f'<div class="call-line">{"".join(line)}</div>',
        f'<details class="call-args" open><summary>Arguments <code class="call-args-hash muted" title="{title}">{short}'
        f'</code></summary>{arguments}</details>',
        _approval(call),
        _edit(call),
    ]
    if call.status == ToolCall.Status.UNKNOWN:
        parts.append('<div class="call-unknown warn">This call may have taken effect: check the real state before doing it again.</div>')
    if call.result_edit:
        at = f" at {escape(call.result_edit['at'])}" if call.result_edit["at"] else ""
        parts.append(
            f'<div class="call-result-edited warn">Result edited by {escape(call.result_edit["by"] or "an operator")}{at}: the '
            "model read the text below instead of the recorded result (the full result shows both). The status and "
            "error are what the call really did.</div>"
        )
    if call.error:
        recorded = "Recorded: " if call.result_edit else ""
        parts.append(f'<div class="call-error error">{recorded}{escape(call.error)}</div>')
    if call.result_text:
        parts.append(_result(call))
    parts.append("</li>")
    return "".join(parts)


def _step(step) -> str:
    kind = escape(step.kind)
    title = f"Step {step.index}" + (" · summary" if step.kind == "summary" else "")
    parts = [
        f'<div class="step step-{kind}" id="step-{step.index}" data-index="{step.index}" data-iteration="{step.iteration}" '
        f'data-compacted="{escape(json.dumps(step.compacted_calls))}">',
        '<div class="step-head">',
        f"<strong>{title}</strong>",
        f'<span class="muted">iteration {step.iteration}</span>',
        _step_time(step.created_at),
        f'<span class="step-model mono" title="the model that answered">{escape(step.model)}</span>',
        f'<span class="step-latency">{round(step.latency_ms)} ms</span>',
        f'<span class="step-tokens">{escape(tokens_text(step))}</span>',
        f'<span class="step-request muted" title="estimated before sending; the tool definitions are sent with '
        f'every request">{escape(request_text(step))}</span>' if step.context_tokens else "",
        f'<span class="step-cost muted">${step.cost_usd:.6f}</span>',
        f'<span class="step-finish">finish: {escape(step.finish_reason or "—")}</span>',
        "</div>",
    ]
    if step.compacted_calls:
        parts.append(f'<div class="step-compacted muted">{escape(compacted_text(step.compacted_calls))}</div>')
    if step.model_errors:
        parts.append(f'<div class="step-errors warn">Before this answer: {escape("; ".join(map(str, step.model_errors)))}</div>')
    if step.notes:
        parts.append(f'<div class="step-notes muted">Reading this answer: {escape("; ".join(map(str, step.notes)))}</div>')
    if step.reasoning:
        parts.append('<details class="step-reasoning"><summary>Reasoning</summary>'
                     f'<div class="run-text muted">{escape(step.reasoning)}</div></details>')
    if step.content:
        # An answer that is JSON reads as a tree, like the calls' arguments and results.
        pretty = pretty_json(step.content)
        if pretty is not None:
            parts.append(tree_source(pretty, name=f"the model's answer in step {step.index}",
                                     classes="assistant-text assistant-json mono", indented=True))
        else:
            parts.append(f'<div class="assistant-text run-text">{escape(step.content)}</div>')
    parts.append(f'<ul class="calls">{"".join(_call(call, step.index) for call in step.shown_calls)}</ul></div>')
    return "".join(parts)


def timeline_html(*, run, timeline: dict) -> SafeString:
    steps = timeline["steps"]
    parts = [_step(step) for step in steps]
    if not steps:
        parts.append('<p class="muted" id="timeline-empty">No steps yet: the run has not asked its model anything.</p>')
    if timeline["more"]:
        parts.append(f'<p class="muted">Only the first {len(steps)} steps are shown here; the live page shows them all.</p>')
    if run.is_finished:
        status = escape(run.status)
        detail = escape(run.stop_detail or run.get_stop_reason_display())
        ended = f' <span class="run-end-time muted">{escape(_when(run.finished_at))}</span>' if run.finished_at else ""
        parts.append(
            f'<div class="run-end" data-status="{status}"><p>Run ended: <span class="run-end-status status status-{status}" '
            f'data-status="{status}">{escape(status_label(run))}</span>{ended}</p>'
            f'<p class="run-end-detail run-text">{detail}</p></div>'
        )
    return mark_safe("".join(parts))  # noqa: S308 - every value above went through escape

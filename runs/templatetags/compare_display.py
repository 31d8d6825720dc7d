"""What differs between two runs' steps, marked for the compare pages (a fork beside its parent,
one case's runs in two experiments): the words of answers and results that were removed and added,
the keys of arguments and results that changed, and each call named as everywhere else.

Every value is escaped (format_html); the marks are <del> and <ins>, which say "removed" and
"added" in words to a screen reader (_compare_styles.html) and are struck through and underlined."""
from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from runs.lifecycle.call_labels import call_label
from runs.lifecycle.value_changes import json_object, key_changes, word_changes

register = template.Library()

def marked_words(text: str, other: str | None, side: str) -> SafeString:
    """`text` with the words the other side lacks marked: <del> on the "old" side (the parent, the
    earlier experiment), <ins> on the "new" one. Unmarked when there is no other side."""
    if other is None or text == other:
        return format_html("{}", text)
    changes = word_changes(text, other) if side == "old" else word_changes(other, text)
    pieces = changes["old"] if side == "old" else changes["new"]
    return format_html_join("", "{}", ((_piece(kind, words),) for kind, words in pieces))


def _piece(kind: str, words: str) -> SafeString:
    if kind == "removed":
        return format_html('<del class="change-removed">{}</del>', words)
    if kind == "added":
        return format_html('<ins class="change-added">{}</ins>', words)
    return format_html("{}", words)


def _key_changes(old_text: str, new_text: str) -> list[dict] | None:
    """The keys that changed from old to new, when both are JSON objects (else None: compare words)."""
    old, new = json_object(old_text), json_object(new_text)
    if old is None or new is None:
        return None
    return key_changes(old, new)


@register.simple_tag
def step_changes(step: dict, other, side: str) -> dict:
    """This side's step as the compare page shows it: its answer marked against the other side's,
    and its calls (paired with the other side's by position), each with its label, the keys of its
    arguments that changed, and its result marked (keys when both results are JSON objects, else words).
    `other`: the other side's step of the same index, or None; `side`: "old" or "new"."""
    other = other or None
    theirs = other["calls"] if other else []
    calls = []
    for n, call in enumerate(step["calls"]):
        their = theirs[n] if n < len(theirs) else None
        shown = {**call, "label": call_label(tool=call["tool"], arguments=call["arguments"], step=step["index"]),
                 "argument_changes": None, "result_changes": None, "result_marked": format_html("{}", call["result_preview"])}
        if their is not None and call.get("arguments_differ"):
            old, new = (call, their) if side == "old" else (their, call)
            shown["argument_changes"] = _key_changes(old["arguments"], new["arguments"])
        if their is not None and call.get("result_differs"):
            old, new = (call, their) if side == "old" else (their, call)
            shown["result_changes"] = _key_changes(old["result_preview"], new["result_preview"])
            if shown["result_changes"] is None:
                shown["result_marked"] = marked_words(call["result_preview"], their["result_preview"], side)
        calls.append(shown)
    content = marked_words(step["content"], other["content"] if other and step.get("content_differs") else None, side)
    return {"content": content, "calls": calls}


@register.simple_tag
def answer_changes(text: str, other: str, side: str) -> SafeString:
    """A run's final answer marked against the other run's (the pages' foot)."""
    return marked_words(text or "", other or "", side) if (text or "") != (other or "") else format_html("{}", text or "—")

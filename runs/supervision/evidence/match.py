"""Where a run saw one argument value first: the matching rule, as pure functions over text.

The rule (what counts as "the run saw this value here"):
- A string without whitespace of 3 to 100 characters (an order id, an e-mail address, a word)
  is an identifier: found as a whole token, case-insensitively. "A whole token" means that
  where the value starts or ends with a letter, digit or underscore, the text has none right
  before or after it: ORD-10 is not in ORD-1001, bob@x.co is not in bob@x.com.
- Any other string (one with whitespace, or longer than 100 characters) is free text: found
  only verbatim (exact case, every character), with the same token edges. No fuzzy matching:
  a reason the model reworded is the model's.
- A number is found as that number written out, as a whole token: 30 in "30", "30.0" or
  "30.00", 12.5 in "12.50"; never inside a longer number, a word or a decimal (12 is not in
  "112", "v12" or "12.5").
- Short values (a string under 3 characters, a number between -99 and 99) occur by chance in
  almost any text ("2" in a date, "US" in "USB"), so they count only where they stand alone: in
  a tool result, as the whole value of a field ("quantity": 2, "country": "US"); in the system
  prompt, the task or an operator's message, as a separate word (between spaces, quotes,
  brackets or a sentence's punctuation, never joined to other characters by - . : /).
- Strings are looked for as written and as JSON writes them inside a string (quotes and
  backslashes escaped, and non-ASCII as \\u escapes), since tool results are JSON text.
- Booleans, null and empty strings are never looked for: the model wrote them.
"""
import json
import math
import re
from typing import Any

SHORT_CHARS = 3  # strings shorter than this are short
SMALL_NUMBER = 100  # numbers whose size is under this are short
TOKEN_MAX_CHARS = 100  # longer strings are free text even without whitespace


def looked_for(value: Any) -> bool:
    """Whether a value is searched at all (booleans, null and "" are the model's own)."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, int | float)


def is_short(value: Any) -> bool:
    if isinstance(value, str):
        return len(value.strip()) < SHORT_CHARS
    return abs(value) < SMALL_NUMBER


def _edges(text: str) -> tuple[str, str]:
    before = r"(?<!\w)" if re.match(r"\w", text[0]) else ""
    after = r"(?!\w)" if re.match(r"\w", text[-1]) else ""
    return before, after


def _string_forms(value: str) -> list[str]:
    return list(dict.fromkeys([value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]]))


def _number_core(value: int | float) -> str | None:
    """The number's digits as a pattern ("30(?:\\.0+)?", "12\\.50*"); None when it has no plain form."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return re.escape(str(abs(value))) + r"(?:\.0+)?"
    text = repr(abs(value))
    if "e" in text or "." not in text:
        return None
    whole, fraction = text.split(".")
    return re.escape(whole) + r"\." + re.escape(fraction) + "0*"


# A short value standing alone: as a field's whole value in JSON, as a word in prose.
_JSON_BEFORE, _JSON_AFTER = r"[:\[,]\s*", r"\s*[,\]}]"
_WORD_BEFORE = r"(?:^|(?<=[\s\"'(\[{$€£#]))"
_WORD_AFTER = r"(?=$|[\s\"')\]},;!?]|[.:](?:\s|$))"


class Needle:
    """One argument value as the patterns that find it: in prose (the system prompt, the task, an
    operator's message) and in JSON (a tool result). `find` gives the span of the first match."""

    def __init__(self, value: Any):
        self.value = value
        self.prose, self.json = self._patterns(value)
        # A cheap check before the regular expression: text that holds none of these cannot match.
        self.hints, self.fold = self._hints(value)

    @staticmethod
    def _hints(value) -> tuple[list[str], bool]:
        if isinstance(value, str):
            fold = _is_token(value) or is_short(value)  # matched case-insensitively
            return [f.lower() if fold else f for f in _string_forms(value)], fold
        return [str(abs(int(value)))], False

    @staticmethod
    def _patterns(value) -> tuple[re.Pattern | None, re.Pattern | None]:
        short = is_short(value)
        if isinstance(value, str):
            token = _is_token(value)
            flags = re.IGNORECASE if token or short else 0
            forms = "|".join(re.escape(f) for f in sorted(_string_forms(value), key=len, reverse=True))
            if short:
                return (re.compile(rf"{_WORD_BEFORE}(?P<m>{forms}){_WORD_AFTER}", flags),
                        re.compile(rf"{_JSON_BEFORE}\"(?P<m>{forms})\"{_JSON_AFTER}", flags))
            before, after = _edges(value)
            pattern = re.compile(rf"{before}(?P<m>{forms}){after}", flags)
            return pattern, pattern
        core = _number_core(value)
        if core is None:
            pattern = re.compile(rf"(?<![\w.])(?P<m>{re.escape(json.dumps(value))})(?!\w|\.\d)")
            return pattern, pattern
        number = ("-" if value < 0 else "") + core
        if short:
            return (re.compile(rf"{_WORD_BEFORE}(?P<m>{number}){_WORD_AFTER}"),
                    re.compile(rf"{_JSON_BEFORE}(?P<q>\"?)(?P<m>{number})(?P=q){_JSON_AFTER}"))
        pattern = re.compile(rf"(?<![\w.])(?P<m>{number})(?!\w|\.\d)")
        return pattern, pattern

    def find(self, text: str, *, json_text: bool, folded: str | None = None) -> tuple[int, int] | None:
        """(start, end) of the first place `text` holds the value, or None. `folded`: text.lower(),
        when the caller keeps it (each source is searched for many values)."""
        if not text:
            return None
        haystack = (folded if folded is not None else text.lower()) if self.fold else text
        if not any(h in haystack for h in self.hints):
            return None
        pattern = self.json if json_text else self.prose
        found = pattern.search(text)
        return found.span("m") if found else None


def _is_token(value: str) -> bool:
    return len(value) <= TOKEN_MAX_CHARS and not any(c.isspace() for c in value)


def around(text: str, start: int, end: int, chars: int) -> tuple[str, str, str]:
    """(what comes before, the match, what comes after): up to `chars` characters each side,
    with an ellipsis where the text goes on."""
    before = text[max(0, start - chars):start]
    after = text[end:end + chars]
    return ("…" if start > chars else "") + before, text[start:end], after + ("…" if end + chars < len(text) else "")

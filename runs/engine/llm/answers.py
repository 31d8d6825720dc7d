"""Reading a model's answer into text we can store, show and send back (used by runs/engine/llm/completions.py).

Providers send things a database or an encoder refuses, and shapes beyond a string content:
- an unpaired UTF-16 surrogate ("\\ud83d", half an emoji, when a model cuts a multi-byte
  character): Python keeps it in a str, but it cannot be encoded as UTF-8, so the step's write,
  the arguments' hash and the next request would fail;
- a NUL character ("\\u0000"): valid JSON, refused by PostgreSQL in jsonb and text columns;
- content as a list of parts (text, and a reasoning model's "thinking"), or a reasoning field
  beside the content.
Each odd character becomes U+FFFD where the answer is read, and a note says what was replaced;
the answer is the text parts, the reasoning is kept apart and never sent back as content.
"""
import json
import re

REPLACEMENT = "\ufffd"
# An unpaired surrogate (a high one not followed by a low one, or a low one alone), or NUL.
_ODD = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]|\x00")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
# A \uXXXX escape inside JSON text (not itself escaped: an even run of backslashes before it).
_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})")
TEXT_PARTS = ("text", "output_text")
REASONING_PARTS = ("thinking", "reasoning", "redacted_thinking")
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _is_high(code: int) -> bool:
    return 0xD800 <= code <= 0xDBFF


def _is_low(code: int) -> bool:
    return 0xDC00 <= code <= 0xDFFF


def safe_text(text: str) -> tuple[str, int]:
    """(text with every unpaired surrogate and NUL replaced by U+FFFD, how many were replaced).
    A surrogate pair left in a str (not joined by the JSON reader) becomes its character."""
    if text.isascii() and "\x00" not in text:
        return text, 0
    if _PAIR.search(text):
        text = _PAIR.sub(lambda m: m.group().encode("utf-16", "surrogatepass").decode("utf-16"), text)
    return _ODD.subn(REPLACEMENT, text)


def safe_json_text(text: str) -> tuple[str, int]:
    """JSON text (call arguments) safe twice over: its characters, and the escapes that would
    decode to an unpaired surrogate or NUL ("\\ud83d", "\\u0000") written as "\\ufffd"."""
    text, fixed = safe_text(text)
    if "\\u" not in text:
        return text, fixed
    matches = list(_ESCAPE.finditer(text))
    out, last, i = [], 0, 0
    while i < len(matches):
        m = matches[i]
        code = int(m.group(2), 16)
        following = matches[i + 1] if i + 1 < len(matches) else None
        if (_is_high(code) and following is not None and following.start() == m.end() and not following.group(1)
                and _is_low(int(following.group(2), 16))):
            i += 2  # a whole pair: one character
            continue
        if code == 0 or _is_high(code) or _is_low(code):
            out += [text[last:m.start(2) - 2], "\\ufffd"]
            last = m.end()
            fixed += 1
        i += 1
    out.append(text[last:])
    return "".join(out), fixed


class Notes:
    """What reading an answer changed, in plain words, for the step."""

    def __init__(self):
        self.lines: list[str] = []

    def text(self, value, where: str) -> str:
        value = "" if value is None else value if isinstance(value, str) else str(value)
        value, fixed = safe_text(value)
        self._replaced(fixed, where)
        return value

    def json_text(self, value: str, where: str) -> str:
        value, fixed = safe_json_text(value)
        self._replaced(fixed, where)
        return value

    def _replaced(self, fixed: int, where: str) -> None:
        if fixed:
            what = "character" if fixed == 1 else "characters"
            self.lines.append(
                f"{where}: {fixed} {what} that cannot be stored or sent (an unpaired surrogate or NUL) "
                "replaced with U+FFFD"
            )


def content_and_reasoning(message: dict, notes: Notes) -> tuple[str, str]:
    """(the answer's text, its reasoning) from a message whose content may be a list of parts."""
    content = message.get("content")
    texts, thoughts, left_out = [], [], []
    if content is None:
        pass
    elif isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(part, str):
                texts.append(part)
            elif kind in TEXT_PARTS:
                texts.append(_as_text(part.get("text")))
            elif kind in REASONING_PARTS:
                thoughts.append(_as_text(part.get("thinking") or part.get("text") or part.get("reasoning")
                                         or part.get("summary") or part.get("data")))
            else:
                left_out.append(str(kind)[:40])
    else:
        texts.append(json.dumps(content))
    for name in REASONING_FIELDS:
        if isinstance(message.get(name), str) and message[name]:
            thoughts.append(message[name])
    if left_out:
        notes.lines.append(f"content parts left out (not text): {', '.join(left_out)}")
    text = notes.text("".join(texts), "the answer's content")
    reasoning = notes.text("\n\n".join(t for t in thoughts if t), "the reasoning")
    return text, reasoning


def _as_text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def provider_error(obj) -> str:
    """The provider's own error message in a 200 body, choice or chunk ({"error": {"code", "message"}},
    or vLLM's {"object": "error", "code", "message"}), or ""."""
    error = obj.get("error") if isinstance(obj, dict) else None
    if not error and isinstance(obj, dict) and obj.get("object") == "error":
        error = {"code": obj.get("code"), "message": obj.get("message")}
    if not error:
        return ""
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        text = ": ".join(str(part) for part in (code, message) if part not in (None, "")) or json.dumps(error)
    else:
        text = str(error)
    return safe_text(text)[0]

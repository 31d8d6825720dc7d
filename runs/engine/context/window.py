"""Working memory within a budget: what one request carries, estimated and compacted in code.

The conversation a run sends grows with every tool result. Before each request the loop asks
`fit` for the messages to send: when they would pass the run's context budget, the oldest tool
results are replaced, in the request only, by a short summary (the tool, its arguments' hash,
whether it succeeded, a bounded preview, and how to read the whole result again). The journal
(the steps and calls in the database) keeps every result whole, and the built-in
`read_tool_result` tool reads one back by its call id.

What always stays whole: the system prompt, the task, operator notes and other user messages,
every assistant message with its tool calls (the protocol pairs them with their results; only the
long arguments of a call refused before it ran go back as a note, see `refused_arguments`), and
the results of the two latest steps (of the latest one only, when nothing else fits). As a run
grows, the oldest summaries lose their preview, then shrink to one line each. Each call keeps exactly one result message, in order, so
the request stays valid for every OpenAI-compatible provider.

Counting needs no network: an estimate from the text's size that errs on the safe side (English
is about four characters a token and JSON about three; we count three, and a non-ASCII
character as its UTF-8 bytes).
"""
import json
import math
import re
from dataclasses import dataclass, field

from django.conf import settings

from runs.engine.guards import args_hash

READ_BACK_TOOL = "read_tool_result"
CHARS_PER_TOKEN = 3
MESSAGE_TOKENS = 4  # the role and separators each message costs
# Shorter results are never summarised (a summary is about this long); a longer one is when its
# summary is shorter.
MIN_COMPACTED_CHARS = 300
TERSE = -1  # a summary's preview length that means: one line, no arguments' hash
FAILED = re.compile(r'\{\s*"ok"\s*:\s*false')  # how a failed call's result starts (records.set_result)
# A call refused before it ran (unknown tool, not JSON, against its schema) with longer arguments
# than this has them sent back as a note (see refused_arguments); shorter ones go back as sent.
REFUSED_KEPT_CHARS = 2000
REFUSED_NOTE = "arguments_not_sent_again"
REFUSED_REASON_CHARS = 200
MAX_SCALE = 4.0  # of our estimate, at most, when a provider counts more
CALIBRATING_SHARE = 0.25  # of the budget: the smallest request whose count scales the estimate
SAFETY_MARGIN = 0.05  # of the context window, kept free besides the answer's cap


@dataclass(frozen=True)
class Effort:
    """How hard a compaction tries: the recent steps whose results stay whole, the preview kept."""

    keep_steps: int
    preview_chars: int
    target_share: float = 1.0  # of the budget (a refused request aims lower)


NORMAL = Effort(keep_steps=2, preview_chars=300)
# After a provider refused a request for its length: the budget goes below what it refused.
HARDER = Effort(keep_steps=1, preview_chars=100, target_share=0.7)


class ContextFull(Exception):
    """Even with every older result summarised, the request would pass the budget."""

    def __init__(self, tokens: int, budget: int):
        super().__init__(f"about {tokens:,} tokens with every older result summarised, over a budget of {budget:,}")
        self.tokens, self.budget = tokens, budget


def text_tokens(text: str) -> int:
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return math.ceil(size / CHARS_PER_TOKEN)


def message_tokens(message: dict) -> int:
    tokens = MESSAGE_TOKENS
    content = message.get("content")
    if isinstance(content, str):
        tokens += text_tokens(content)
    elif content is not None:
        tokens += text_tokens(json.dumps(content))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += MESSAGE_TOKENS + text_tokens(call.get("id") or "") + text_tokens(function.get("name") or "")
        tokens += text_tokens(function.get("arguments") or "")
    if message.get("tool_call_id"):
        tokens += text_tokens(message["tool_call_id"])
    return tokens


def refused_arguments(arguments: str, *, arguments_hash: str, error: str) -> str:
    """A refused call's arguments as later requests carry them, in its assistant message.

    The tool never saw them, and sent back whole, a megabyte written once would fill every later
    request (compaction only summarises results). Short ones go back as sent, so the model sees
    its mistake and can fix it; longer ones become a note of their size, their keyed hash (the
    call's args_hash, as summaries show it) and why they were refused. The note is a JSON object:
    the protocol's arguments are a JSON text, and some servers parse them into an object. The
    journal keeps the arguments whole."""
    if not isinstance(arguments, str) or len(arguments) <= REFUSED_KEPT_CHARS:
        return arguments
    reason = error if len(error) <= REFUSED_REASON_CHARS else error[:REFUSED_REASON_CHARS - 1] + "…"
    return json.dumps({REFUSED_NOTE: {
        "characters": len(arguments),
        "arguments_hash": arguments_hash[:12],
        "refused_because": reason,
        "note": "These arguments were refused before the tool ran and are not sent again in full.",
    }}, ensure_ascii=False)


def shown_hash(arguments: str) -> str:
    """The start of a call's keyed arguments hash that a summary shows (a refused call's note
    carries the hash of the arguments it stands for)."""
    if arguments.startswith('{"' + REFUSED_NOTE):
        try:
            return str(json.loads(arguments)[REFUSED_NOTE]["arguments_hash"])
        except (ValueError, KeyError, TypeError):
            pass
    return args_hash(arguments, settings.ARGS_HASH_KEY)[:12]


def definitions_tokens(definitions: list[dict]) -> int:
    """What the tool definitions cost in every request (each schema is sent every time)."""
    return text_tokens(json.dumps(definitions, separators=(",", ":"))) if definitions else 0


def context_budget(*, models: list[str], max_output_tokens: int | None, own_budget: int | None) -> int:
    """The tokens a run's requests may carry: the agent's own budget, or the smallest known context
    window of its models less the answer's cap and a safety margin."""
    if own_budget:
        return int(own_budget)
    lengths = settings.LLM_CONTEXT_LENGTHS
    windows = [lengths.get(m) or lengths.get(m.split(":")[0]) or settings.LLM_CONTEXT_TOKENS for m in models or [""]]
    window = min(int(w) for w in windows)
    # The answer's cap, but never more than half the window (a cap as large as the window would
    # leave no room for the conversation at all).
    answer = min(max_output_tokens or settings.LLM_MAX_OUTPUT_TOKENS or 0, window // 2)
    return max(1, int(window * (1 - SAFETY_MARGIN)) - answer)


@dataclass
class Fitted:
    """The messages one request carries and what it took to fit them."""

    messages: list[dict]
    tokens: int  # estimated (and scaled to what the provider counts), tool definitions included
    compacted: list[str] = field(default_factory=list)  # call ids whose result is a summary
    new: int = 0  # results summarised that the previous request carried whole


@dataclass(frozen=True)
class _Result:
    """What a summary says of one result, from the assistant message that asked for it."""

    call_id: str
    tool: str
    arguments: str
    step: int  # the step that asked for it (the n-th assistant message): call ids may repeat


class Window:
    """A run's conversation as the driver sends it, with each message's estimated size kept (the
    list only grows), so fitting a request costs a pass over the sizes, not over the text.

    Summaries stick: a result summarised once stays summarised (at the same level) in every later
    request, so the start of the conversation, which providers cache, changes only when more must
    be summarised; and then it goes down to HEADROOM of the budget, so that the next requests fit
    without changing it again."""

    HEADROOM = 0.75

    def __init__(self, budget: int, *, read_back: bool = True):
        self.budget = budget  # 0: no budget (compaction is off)
        self.read_back = read_back  # the run has the tool that reads a summarised result again
        self.scale = 1.0  # what the provider counted / what we estimated, when it was more
        self.sizes: list[int] = []
        self.results: dict[int, _Result] = {}  # position of a tool message -> what it answers
        self._steps = 0
        self._calls: dict[str, tuple[str, str]] = {}  # the latest assistant message's calls
        self.sticky: dict[int, dict] = {}  # position -> the summary sent there last time
        self.resumed_ids: set[str] = set()  # summarised before this driver (its first fit adopts them)

    def fit(self, history: list[dict], tail: list[dict], definitions_cost: int, effort: Effort = NORMAL,
            refused_at: int | None = None) -> Fitted:
        """`history + tail` as they fit the budget; raises ContextFull when they cannot.

        `history`: the conversation so far, a list that only grows (its sizes are kept); `tail`: the
        messages added for this request alone (verification feedback, operator notes), never
        summarised. `refused_at`: the estimate of a request a provider refused for its length: our
        estimate was too low for that model, so the budget is lowered below it for the rest of the
        run's driver."""
        self._measure(history)
        raw = sum(self.sizes) + sum(message_tokens(m) for m in tail) + definitions_cost
        if not self.budget:
            return Fitted(history + tail, self._scaled(raw))
        if refused_at:
            self.budget = max(1, min(self.budget, int(refused_at * effort.target_share)))
        if self.resumed_ids:
            self._adopt(history)
        sent = list(history)
        for position, summary in self.sticky.items():
            raw += message_tokens(summary) - self.sizes[position]
            sent[position] = summary
        before = set(self.sticky)
        if self._scaled(raw) > self.budget:
            raw = self._compact(history, sent, raw, effort, self.budget * self.HEADROOM / self.scale)
            if self._scaled(raw) > self.budget:
                raise ContextFull(self._scaled(raw), self.budget)
        compacted = sorted(self.sticky)
        return Fitted(sent + tail, self._scaled(raw), [self.results[p].call_id for p in compacted],
                      len(set(compacted) - before))

    def observe(self, estimated: int, counted: int) -> None:
        """The provider counted `counted` input tokens of a request we estimated at `estimated`:
        when that is more, later estimates are scaled up by as much (at most 4x). Only a request of
        a quarter of the budget or more teaches it: in a small one, what a provider adds to every
        request (its chat template, the tools written out) would pass for a finer tokenizer."""
        if estimated >= max(1, self.budget * CALIBRATING_SHARE) and counted > estimated:
            self.scale = min(MAX_SCALE, counted / (estimated / self.scale))

    def _compact(self, history, sent, raw: int, effort: Effort, target_raw: float) -> int:
        """Summarise results in `sent` until the estimate is at most `target_raw`; the new total."""
        # Oldest first, each pass only as far as needed: summaries with a preview; then the oldest
        # without it; then one line each (a long run keeps a line per old result); last, only the
        # latest step's results stay whole.
        passes = [(effort.preview_chars, effort.keep_steps), (0, effort.keep_steps), (TERSE, effort.keep_steps),
                  (TERSE, 1)]
        for preview_chars, keep_steps in passes:
            protected = self._recent_results(history, keep_steps)
            for position, message in enumerate(history):
                if raw <= target_raw:
                    return raw
                if message.get("role") != "tool" or position in protected or position not in self.results:
                    continue
                content = message.get("content")
                if not isinstance(content, str) or len(content) < MIN_COMPACTED_CHARS:
                    continue
                summary = {**message, "content": self.summary(self.results[position], content, preview_chars)}
                saved = message_tokens(sent[position]) - message_tokens(summary)
                if saved <= 0:  # a short result, or summarised this far already
                    continue
                raw -= saved
                sent[position] = self.sticky[position] = summary
        return raw

    def summary(self, result: _Result, content: str, preview_chars: int) -> str:
        outcome = "failed" if FAILED.match(content) else "succeeded"
        where = {"call_id": result.call_id, "step": result.step}
        read_back = (f"Read it whole again: {READ_BACK_TOOL} with {json.dumps(where)}." if self.read_back
                     else "The whole result is kept in the run's journal.")
        if preview_chars == TERSE:
            return (f"[Result summarised] {result.tool} {result.call_id} (step {result.step}) {outcome}"
                    + (f"; {READ_BACK_TOOL} reads it whole." if self.read_back else "."))
        head = (f"[Result summarised to keep the conversation within the model's context] Tool {result.tool}, "
                f"call {result.call_id} of step {result.step}, arguments hash "
                f"{shown_hash(result.arguments)}: {outcome}.")
        if not preview_chars:
            return f"{head} {read_back}"
        preview = content[:preview_chars]
        more = len(content) - len(preview)
        return f"{head}\nPreview: {preview}" + (f"… ({more:,} more characters)" if more else "") + f"\n{read_back}"

    def _scaled(self, raw: float) -> int:
        return math.ceil(raw * self.scale)

    def _adopt(self, history: list[dict]) -> None:
        """A new driver's first request summarises at least what the last one before it did (by
        the recorded call ids; the newest result of a repeated id stays whole)."""
        ids, self.resumed_ids = self.resumed_ids, set()
        protected = self._recent_results(history, NORMAL.keep_steps)
        for position, result in self.results.items():
            content = history[position].get("content")
            if result.call_id in ids and position not in protected and isinstance(content, str):
                self.sticky[position] = {**history[position], "content": self.summary(result, content, 0)}

    def _measure(self, messages: list[dict]) -> None:
        if len(self.sizes) > len(messages):  # rebuilt from the rows: start again
            self.sizes, self.results, self.sticky, self._steps = [], {}, {}, 0
        for position in range(len(self.sizes), len(messages)):
            message = messages[position]
            self.sizes.append(message_tokens(message))
            if message.get("role") == "assistant":
                self._steps += 1
                self._calls = {call.get("id"): ((call.get("function") or {}).get("name") or "",
                                                (call.get("function") or {}).get("arguments") or "")
                               for call in message.get("tool_calls") or ()}
            elif message.get("role") == "tool":
                call_id = message.get("tool_call_id") or ""
                tool, arguments = self._calls.get(call_id, ("a tool", ""))
                self.results[position] = _Result(call_id, tool, arguments, self._steps)

    @staticmethod
    def _recent_results(messages: list[dict], keep_steps: int) -> set[int]:
        """Positions of the tool results answering the last `keep_steps` assistant messages."""
        protected: set[int] = set()
        seen = 0
        for position in range(len(messages) - 1, -1, -1):
            role = messages[position].get("role")
            if role == "assistant":
                seen += 1
                if seen >= keep_steps:
                    break
            elif role == "tool":
                protected.add(position)
        return protected

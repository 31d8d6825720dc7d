"""The answer a model is writing, shown live on the run page and never stored.

llm.complete hands each streamed chunk's progress to an AnswerStream; it sends what a person
would see (the text so far, the reasoning so far, each tool call's name and arguments so far)
over the channel layer, at most once every STREAM_PUBLISH_SECONDS per run: a thousand runs
streaming at once send a few messages a second each, not one per token. Each message carries the
whole answer so far (up to STREAM_SHOWN_CHARS a field), so a page opened or reloaded mid-answer
shows the text so far with the next message, then follows the stream. When the step is committed,
its event replaces the streamed text on the page; a stream cut in the middle is sent once more as
"discarded", with the reason, and the next model's answer (if any) starts a new one.

The publisher sends only to runs somebody watches (events._groups_with_members), and a run that
nobody watched a moment ago is not even queued again for STREAM_UNWATCHED_SECONDS.
"""
import time

from runs.engine.llm.stream import StreamedAnswer
from runs.engine.storage import events

STREAM_PUBLISH_SECONDS = 0.25
STREAM_SHOWN_CHARS = 20_000
HIDDEN = "hidden until the answer is complete: this tool has sensitive fields"


class AnswerStream:
    """The run page's view of one iteration's answer. `step` is the index the step will have;
    `shown_tools` are the tools whose arguments may be shown as they are written (the run's
    tools without sensitive fields: a sensitive value is masked only once the arguments parse)."""

    def __init__(self, *, run_id: int, group: str, step: int, shown_tools: set[str], clock=time.monotonic):
        self.run_id, self.group, self.step, self.shown_tools, self.clock = run_id, group, step, shown_tools, clock
        self.attempt = 0
        self.model = ""
        self.sent_at = 0.0
        self.pending: StreamedAnswer | None = None  # progress not sent yet

    def begin(self, model: str) -> None:
        """A new request (the first, or the next model after a failure)."""
        self.attempt += 1
        self.model = model
        self.sent_at = self.clock()  # the first message after one interval: short answers send none
        self.pending = None

    def update(self, answer: StreamedAnswer) -> None:
        now = self.clock()
        if now - self.sent_at < STREAM_PUBLISH_SECONDS:
            self.pending = answer
            return
        self.sent_at, self.pending = now, None
        self._send(self._message(answer, "writing"))

    def discard(self, reason: str, answer: StreamedAnswer | None) -> None:
        """The answer being written will not be used (the stream was cut, or unreadable)."""
        if answer is None or not answer.chunks:
            return
        message = self._message(answer, "discarded")
        message["reason"] = reason
        self._send(message, always=True)

    def _message(self, answer: StreamedAnswer, state: str) -> dict:
        text, reasoning = answer.text(), answer.reasoning_text()
        calls = []
        for name, arguments in answer.calls_so_far():
            shown = name in self.shown_tools
            calls.append({"tool": name[:200], "arguments": arguments[:STREAM_SHOWN_CHARS] if shown else None,
                          "hidden": "" if shown else HIDDEN})
        return {
            "type": "run.stream", "run_id": self.run_id, "step": self.step, "attempt": self.attempt,
            "model": self.model, "state": state,
            "content": text[:STREAM_SHOWN_CHARS], "reasoning": reasoning[:STREAM_SHOWN_CHARS],
            "truncated": len(text) > STREAM_SHOWN_CHARS or len(reasoning) > STREAM_SHOWN_CHARS,
            "calls": calls,
        }

    def _send(self, message: dict, always: bool = False) -> None:
        if (not always and events.unwatched_lately(self.group)):
            return
        events.publish(self.group, message)

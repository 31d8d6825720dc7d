// The answer a model is writing, shown while it streams (runs/engine/streaming.py).
//
// run_live.js passes on each "stream" message of the run's socket as a `run:stream` DOM event,
// and each applied timeline event as `run:event`. A message carries the whole answer so far, so
// a page opened mid-answer shows it at the next message. The stream is never stored: when its
// step is committed (a "step" event with that index), the step in the timeline takes its place.
// A stream cut in the middle stays, struck through and labelled as discarded, until the step
// that replaced it arrives (its "Before this answer" line says why). All text goes in through
// textContent.
import { el } from "./dom.js";
import { jsonOrText } from "./json_tree.js";

const box = document.getElementById("answer-stream");
let committedStep = 0; // the highest step index the timeline has applied
const blocks = new Map(); // `${step}:${attempt}` -> element

function blockFor(message) {
  const key = `${message.step}:${message.attempt}`;
  let block = blocks.get(key);
  if (!block) {
    block = el("div", { class: "stream", dataset: { step: message.step, attempt: message.attempt } });
    blocks.set(key, block);
    box.append(block);
  }
  return block;
}

function render(message) {
  if (message.step <= committedStep) return; // its step is in the timeline already
  // A newer attempt (the next model after a failure) replaces an older one still "writing".
  for (const [key, old] of blocks) {
    if (old.dataset.state === "writing" && Number(old.dataset.attempt) < message.attempt) {
      old.remove();
      blocks.delete(key);
    }
  }
  const block = blockFor(message);
  block.dataset.state = message.state;
  const discarded = message.state === "discarded";
  const head = el("div", { class: "stream-head" });
  head.append(
    el("strong", {}, `Step ${message.step}`),
    el("span", { class: "stream-model mono" }, message.model),
    el("span", { class: discarded ? "stream-state warn" : "stream-state muted" },
      discarded ? "discarded: this answer was not used" : "writing… (not committed yet)"),
  );
  const parts = [head];
  if (discarded && message.reason) parts.push(el("div", { class: "stream-reason warn" }, message.reason));
  if (message.reasoning) parts.push(el("div", { class: "stream-reasoning run-text muted" }, message.reasoning));
  const text = el("div", { class: "stream-text run-text" });
  text.append(el("span", { class: "stream-words" }, message.content || ""));
  if (!discarded && !message.calls.length) text.append(el("span", { class: "stream-caret", "aria-hidden": "true" }, "▍"));
  parts.push(text);
  if (message.truncated) parts.push(el("div", { class: "muted" }, "(the rest is shown once the answer is complete)"));
  if (message.calls.length) {
    const list = el("ul", { class: "calls stream-calls" });
    for (const call of message.calls) {
      const item = el("li", { class: "call stream-call" });
      item.append(el("span", { class: "call-tool mono" }, call.tool || "…"));
      if (call.arguments === null) item.append(el("div", { class: "stream-hidden muted" }, `arguments ${call.hidden}`));
      // Arguments still being written are text; once whole JSON, a tree (as in the timeline).
      else item.append(jsonOrText(call.arguments, { name: `the arguments of ${call.tool || "a call"} being written`, className: "stream-arguments" }));
      list.append(item);
    }
    parts.push(list);
  }
  block.replaceChildren(...parts);
  box.hidden = false;
  box.setAttribute("aria-busy", discarded ? "false" : "true");
}

function clearUpTo(step) {
  for (const [key, block] of blocks) {
    if (Number(block.dataset.step) <= step) {
      block.remove();
      blocks.delete(key);
    }
  }
  box.hidden = blocks.size === 0;
}

document.addEventListener("run:stream", (event) => render(event.detail));
document.addEventListener("run:event", (event) => {
  const { kind, data } = event.detail;
  if (kind === "step" && data.index > committedStep) {
    committedStep = data.index;
    clearUpTo(committedStep);
  } else if (kind === "run" && ["succeeded", "failed", "cancelled"].includes(data.status)) {
    // Ended: an answer still "writing" never will be; a discarded one stays as the last word.
    for (const [key, block] of blocks) {
      if (block.dataset.state === "writing") {
        block.remove();
        blocks.delete(key);
      }
    }
    box.hidden = blocks.size === 0;
  }
});

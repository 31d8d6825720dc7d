// The live timeline of one run, built from the run's events only.
//
// First load, reload and reconnect take the same path: open the socket, send
// {"type": "resume", "after": <last applied seq>}, and apply what comes back. Events are applied
// strictly in seq order: an old one is ignored, the next one is applied, one after a gap is kept
// until the gap is filled (by asking the server to replay from the last applied seq), so every
// path ends with exactly the same timeline. All text goes in through textContent.
import { el, timeNode } from "./dom.js";
import { approvalNode, renderGrant } from "./run_approvals.js";
import { argumentsBlock, argumentsLoader, editBlock } from "./run_arguments.js";
import { callLabel } from "./call_label.js";
import { jsonOrText, jsonTree, parsedJson, upgradeAll } from "./json_tree.js";
import { confirmEndings, leverControls, renderFork, renderLever } from "./run_levers.js";

const page = document.getElementById("run-page");
const timeline = document.getElementById("timeline");
const liveState = document.getElementById("live-state");
const wsPath = page.dataset.wsPath;
const renderedSeq = Number(page.dataset.renderedSeq || 0); // the header was rendered at this seq
const callResultUrl = page.dataset.callResultUrl; // .../calls/0/result/
const approvalUrlPattern = page.dataset.approvalUrl; // .../approvals/0/
const forkUrl = page.dataset.forkUrl; // .../fork/, for operators who may launch
const replayUrl = page.dataset.replayUrl; // .../replay/, likewise (a replay spends tokens)
const approvalUrl = (id) => approvalUrlPattern.replace(/\/0\/$/, `/${encodeURIComponent(id)}/`);
const labels = {
  run: readJson("run-status-labels"),
  call: readJson("call-status-labels"),
  stop: readJson("stop-reason-labels"),
};
// Every state change of a run, a call or an approval arrives as an event of its own, so the
// page shows what the events say; which statuses are final comes from the server too.
const groups = readJson("status-groups");
const FINISHED = new Set(groups.run_finished || []);
const OUTCOME_UNKNOWN = new Set(groups.call_unknown || []);
// A dropped live event is noticed at the next one (a gap); a dropped LAST event has no next one,
// so the page also asks for anything new now and then.
const CATCH_UP_MS = 20000;
const PREVIEW_CHARS = 300; // a call's result preview in its events (runs/engine/storage/snapshots.py)

let lastSeq = 0;
const waiting = new Map(); // seq -> event that arrived before the ones preceding it
let resumeInFlight = false;
let socket = null;
let retryDelay = 500;
let runStatus = null; // from the last applied "run" event
const calls = new Map(); // call pk -> {data, li}
// The calls' arguments (masked), read from the server after the steps that carry the calls.
const shownArguments = new Map(readJson("call-arguments").map((shown) => [shown.pk, shown])); // call pk -> {arguments, args_hash, edit}
const argumentsSource = argumentsLoader(page.dataset.argumentsUrl, (shown) => {
  shownArguments.set(shown.pk, shown);
  const known = calls.get(shown.pk);
  if (known) fillCall(known.li, known.data);
}, Math.max(0, ...shownArguments.keys()));

document.body.dataset.lastSeq = "0";
document.getElementById("timeline-static").hidden = true;
upgradeAll(timeline); // the server's timeline, until the events rebuild it
confirmEndings();

function readJson(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : {};
}

function setStatusBadge(node, status, names) {
  for (const name of [...node.classList]) if (name.startsWith("status-")) node.classList.remove(name);
  node.classList.add(`status-${status}`);
  node.dataset.status = status;
  node.textContent = names[status] || status;
}

// A run an operator stopped with a summary is stored as cancelled (it is, for every count); people
// read "Stopped by an operator", as the server writes it (runs/lifecycle/run_marks.py status_label).
function setRunStatusBadge(node, data) {
  setStatusBadge(node, data.status, labels.run);
  if (data.status === "cancelled" && data.stop_reason === "operator_stop") node.textContent = labels.stop.operator_stop;
}

const ms = (value) => (value === null || value === undefined ? "" : `${Math.round(value)} ms`);
const usd = (value) => `$${Number(value || 0).toFixed(6)}`;
// As runs/web/timeline_html.py writes them on the server.
function tokensText(d) {
  const tokensIn = `${d.tokens_in} in` + (d.tokens_cached ? ` (${d.tokens_cached} cached)` : "");
  const tokensOut = `${d.tokens_out} out` + (d.tokens_reasoning ? ` (${d.tokens_reasoning} reasoning)` : "");
  return `${tokensIn} / ${tokensOut} tokens`;
}
// Whether a step's request summarised a result its previous step's had not (a compaction, as counted
// on the run by the server).
function newlyCompacted(data) {
  const ids = data.compacted_calls || [];
  if (!ids.length) return false;
  const previous = document.getElementById(`step-${data.index - 1}`);
  let before = [];
  try { before = JSON.parse((previous && previous.dataset.compacted) || "[]"); } catch { before = []; }
  const known = new Set(before);
  return ids.some((id) => !known.has(id));
}
function compactedText(ids) {
  const shown = ids.slice(0, 8).join(", ") + (ids.length > 8 ? ` and ${ids.length - 8} more` : "");
  return `${ids.length} older ${ids.length === 1 ? "result" : "results"} sent as a summary to fit the context budget ` +
    `(whole here and in the journal; the model can read them again): ${shown}`;
}

// --- the socket -----------------------------------------------------------------------------

function connect() {
  if (!liveState.textContent) liveState.textContent = "connecting…";
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}${wsPath}`);
  socket = ws;
  ws.addEventListener("open", () => {
    retryDelay = 500;
    showConnected();
    resume();
  });
  ws.addEventListener("message", (message) => {
    let payload;
    try {
      payload = JSON.parse(message.data);
    } catch {
      return;
    }
    onMessage(payload);
  });
  ws.addEventListener("close", () => {
    if (socket !== ws) return;
    socket = null;
    resumeInFlight = false;
    liveState.textContent = "reconnecting…";
    const delay = retryDelay * (0.75 + Math.random() / 2);
    retryDelay = Math.min(retryDelay * 2, 15000);
    setTimeout(connect, delay);
  });
}

// "live" while the run can still change; once it has ended there is nothing left to stream.
function showConnected() {
  if (!socket || socket.readyState !== WebSocket.OPEN) return;
  const ended = FINISHED.has(runStatus || document.getElementById("run-status").dataset.status);
  liveState.textContent = ended ? "up to date" : "live";
  liveState.title = ended ? "The run has ended: this page shows all of it." : "New steps appear here as they happen.";
}

function resume() {
  if (!socket || socket.readyState !== WebSocket.OPEN) return;
  socket.send(JSON.stringify({ type: "resume", after: lastSeq }));
  resumeInFlight = true;
}

function onMessage(payload) {
  if (payload.type === "event") {
    receive(payload);
  } else if (payload.type === "stream") {
    // An answer being written (never stored): run_stream.js shows it until its step arrives.
    document.dispatchEvent(new CustomEvent("run:stream", { detail: payload }));
  } else if (payload.type === "resumed") {
    resumeInFlight = false;
    // The server sends a long history in parts: ask for the next one at once.
    if (payload.more) {
      resume();
      return;
    }
    argumentsSource.load(); // the calls the replay brought
    // Still a gap after a full replay: the missing event was not stored yet; ask again shortly.
    if (waiting.size) setTimeout(() => waiting.size && !resumeInFlight && resume(), 1000);
  } else if (payload.type === "error") {
    console.warn("timeline:", payload.message);
    // Too many resumes on this connection: the server says when to ask again.
    if (payload.retry_after) {
      resumeInFlight = false;
      setTimeout(() => !resumeInFlight && resume(), payload.retry_after * 1000);
    }
  }
}

function receive(event) {
  if (event.seq <= lastSeq) return;
  if (event.seq !== lastSeq + 1) {
    waiting.set(event.seq, event);
    if (!resumeInFlight) resume();
    return;
  }
  apply(event);
  while (waiting.has(lastSeq + 1)) {
    const next = waiting.get(lastSeq + 1);
    waiting.delete(lastSeq + 1);
    apply(next);
  }
  for (const seq of waiting.keys()) if (seq <= lastSeq) waiting.delete(seq);
}

function apply(event) {
  // The server rendered the timeline as it stood; the replay of the events builds it again,
  // live from here on.
  if (timeline.dataset.serverRendered === "true") {
    timeline.replaceChildren();
    timeline.dataset.serverRendered = "false";
  }
  try {
    const render = RENDERERS[event.kind];
    if (render) render(event.data || {}, event.seq, event.at);
  } catch (error) {
    console.error("timeline: could not render event", event.seq, error);
  }
  lastSeq = event.seq;
  document.body.dataset.lastSeq = String(lastSeq);
  // Other views of the same events (the waterfall, the stream) follow them in the same order.
  document.dispatchEvent(new CustomEvent("run:event", { detail: event }));
}

// --- rendering ------------------------------------------------------------------------------

function append(node) {
  // Everything goes before the closing block, which stays last (a summary may follow the end).
  const end = timeline.querySelector(":scope > .run-end");
  timeline.insertBefore(node, end);
}

function renderStep(data, seq, at) {
  const step = el("div", {
    class: `step step-${data.kind || "turn"}`,
    id: `step-${data.index}`,
    dataset: { index: data.index, iteration: data.iteration, seq, compacted: JSON.stringify(data.compacted_calls || []) },
  });
  const head = el("div", { class: "step-head" });
  head.append(
    el("strong", {}, data.kind === "summary" ? `Step ${data.index} · summary` : `Step ${data.index}`),
    el("span", { class: "muted" }, `iteration ${data.iteration}`),
  );
  // A step is sent again when it changes: it keeps the time it first arrived at.
  const first = document.querySelector(`#step-${CSS.escape(String(data.index))} .step-time`);
  const time = timeNode(first ? first.getAttribute("datetime") : at, { timeOnly: true, className: "step-time muted" });
  if (time) head.append(time);
  head.append(
    el("span", { class: "step-model mono", title: "the model that answered" }, data.model),
    el("span", { class: "step-latency" }, ms(data.latency_ms)),
    el("span", { class: "step-tokens" }, tokensText(data)),
  );
  if (data.context_tokens) {
    head.append(el("span", {
      class: "step-request muted",
      title: "estimated before sending; the tool definitions are sent with every request",
    }, `request ~${data.context_tokens} tokens, of which tool definitions ~${data.tool_definition_tokens}`));
  }
  head.append(
    el("span", { class: "step-cost muted" }, usd(data.cost_usd)),
    el("span", { class: "step-finish" }, `finish: ${data.finish_reason || "—"}`),
  );
  if (forkUrl) {
    head.append(el("a", { class: "step-fork", href: `${forkUrl}?step=${encodeURIComponent(data.index)}` }, "Fork from here"));
  }
  if (replayUrl && data.kind !== "summary") {
    head.append(el("a", { class: "step-replay", href: `${replayUrl}?step=${encodeURIComponent(data.index)}` },
      "Replay this request"));
  }
  if (data.tool_choice) {
    const text = data.tool_choice_fallback
      ? `tool choice: ${data.tool_choice} ("required" was refused)`
      : `tool choice: ${data.tool_choice}`;
    head.append(el("span", { class: "step-tool-choice muted" }, text));
  }
  step.append(head);
  if (data.compacted_calls && data.compacted_calls.length) {
    step.append(el("div", { class: "step-compacted muted" }, compactedText(data.compacted_calls)));
  }
  if (data.model_errors && data.model_errors.length) {
    step.append(el("div", { class: "step-errors warn" }, `Before this answer: ${data.model_errors.join("; ")}`));
  }
  if (data.notes && data.notes.length) {
    step.append(el("div", { class: "step-notes muted" }, `Reading this answer: ${data.notes.join("; ")}`));
  }
  if (data.reasoning) {
    // The model's reasoning, folded: kept apart from its answer and never sent back to it.
    const details = el("details", { class: "step-reasoning" });
    details.append(el("summary", {}, "Reasoning"), el("div", { class: "run-text muted" }, data.reasoning));
    step.append(details);
  }
  if (data.content) {
    // An answer that is JSON reads as a tree, like the calls' arguments and results.
    const json = parsedJson(data.content);
    step.append(json === undefined
      ? el("div", { class: "assistant-text run-text" }, data.content)
      : jsonTree(json, { name: `the model's answer in step ${data.index}`, className: "assistant-text assistant-json" }));
  }
  const list = el("ul", { class: "calls" });
  for (const call of data.calls || []) list.append(callItem(call, data.index));
  step.append(list);
  const existing = document.getElementById(`step-${data.index}`);
  if (existing) existing.replaceWith(step);
  else append(step);
}

function callItem(data, step = undefined) {
  const known = calls.get(data.pk);
  if (known && !data.approval && known.data.approval) data = { ...data, approval: known.data.approval };
  const li = known ? known.li : el("li", { class: "call", dataset: { callPk: data.pk, callId: data.id } });
  calls.set(data.pk, { data, li, step: step ?? known?.step });
  fillCall(li, data);
  return li;
}

// The call's name as every page writes it: tool, arguments in short, step (call_label.js).
function labelNode(data, shown) {
  const label = callLabel({ tool: data.tool, argumentsText: shown?.arguments, step: calls.get(data.pk)?.step });
  const node = el("span", { class: "call-label" });
  node.append(el("span", { class: "call-tool mono" }, label.tool), el("span", { class: "call-args-short mono" }, label.arguments));
  if (label.step) node.append(" ", el("span", { class: "call-step muted" }, `· ${label.step}`));
  return node;
}

// Whether the preview is all of the result (JSON, whole, as recorded): then "Full result" would repeat it.
function previewIsWhole(data) {
  return parsedJson(data.result_preview) !== undefined && !data.truncated && !data.result_edited && data.status !== "simulated";
}

const resultText = new WeakMap(); // result block -> the preview it shows

// The result as the model read it: a tree when the preview is whole JSON, else the preview's text.
// A block already on the page is kept (what the person unfolded or searched) while it is the same.
function resultBlock(data, existing) {
  if (!data.result_preview) return null;
  if (existing && resultText.get(existing) === data.result_preview) return existing;
  const block = el("details", { class: "call-result", open: true });
  resultText.set(block, data.result_preview);
  const summary = el("summary", {}, "Result");
  if (parsedJson(data.result_preview) === undefined && Array.from(data.result_preview).length >= PREVIEW_CHARS) {
    summary.append(" ", el("span", { class: "call-result-cut" }, `(the first ${PREVIEW_CHARS} characters: Full result shows all)`));
  }
  block.append(summary, jsonOrText(data.result_preview, { name: `the result of ${data.tool}`, className: "call-preview" }));
  return block;
}

function fillCall(li, data) {
  const full = li.querySelector(":scope > .call-full") || el("div", { class: "call-full", hidden: true });
  const oldArguments = li.querySelector(":scope > .call-args");
  const oldResult = li.querySelector(":scope > .call-result");
  li.replaceChildren();
  const line = el("div", { class: "call-line" });
  const shown = shownArguments.get(data.pk);
  line.append(labelNode(data, shown));
  const badge = el("span", { class: "call-status status" });
  li.dataset.status = data.status;
  setStatusBadge(badge, li.dataset.status, labels.call);
  line.append(badge);
  if (data.latency_ms !== null && data.latency_ms !== undefined) line.append(el("span", { class: "call-latency muted" }, ms(data.latency_ms)));
  if (data.truncated) {
    line.append(el("span", { class: "call-truncated flag-unseen", title: "the model was sent a shortened result" }, "truncated"));
  }
  if (data.ok !== null && data.ok !== undefined && !previewIsWhole(data)) {
    const button = el("button", {
      type: "button", class: "call-expand", dataset: { callPk: data.pk }, "aria-expanded": String(!full.hidden),
    });
    button.textContent = full.hidden ? "Full result" : "Hide full result";
    line.append(button);
  }
  li.append(line);
  if (shown) li.append(argumentsBlock(shown, oldArguments));
  const approval = approvalNode(data.approval, { call: data, approvalUrl });
  if (approval) li.append(approval);
  const edit = shown && editBlock(shown);
  if (edit) li.append(edit);
  if (OUTCOME_UNKNOWN.has(data.status)) {
    li.append(el("div", { class: "call-unknown warn" },
      "This call may have taken effect: check the real state before doing it again."));
  }
  if (data.result_edited) {
    // A fork's edit: the model read the text below, not what the call returned (the full result
    // keeps the recorded one), and the status and error above are what really happened.
    const when = data.result_edited.at ? ` at ${new Date(data.result_edited.at).toLocaleString(undefined, { timeZoneName: "short" })}` : "";
    li.append(el("div", { class: "call-result-edited warn" },
      `Result edited by ${data.result_edited.by || "an operator"}${when}: the model read the text below instead of the recorded result (Full result shows both). The status and error are what the call really did.`));
  }
  if (data.error) li.append(el("div", { class: "call-error error" }, data.result_edited ? `Recorded: ${data.error}` : data.error));
  const result = resultBlock(data, oldResult);
  if (result) {
    result.hidden = !full.hidden; // the full result shows in its place, not twice
    li.append(result);
  }
  li.append(full);
}

function renderCall(data) {
  if (calls.has(data.pk)) {
    callItem(data);
    return;
  }
  // A call whose step we never saw (should not happen): show it after the last step.
  const steps = timeline.querySelectorAll(".step .calls");
  const list = steps.length ? steps[steps.length - 1] : timeline;
  list.append(callItem(data));
}

function renderApproval(data) {
  const known = calls.get(data.call_pk);
  if (!known) return;
  const { call_pk: _ignored, ...approval } = data;
  known.data = { ...known.data, approval };
  fillCall(known.li, known.data);
  // An edit approved after the arguments were read: read the call again for what ran.
  const shown = shownArguments.get(data.call_pk);
  if ((approval.edited || approval.edited_args_hash) && shown && !shown.edit && approval.status === "approved") {
    argumentsSource.reload(data.call_pk);
  }
}

function renderVerification(data) {
  const text = data.ok ? "The answer passed verification." : `Verification failed: ${data.reason}. The model gets one more try.`;
  append(el("div", { class: "verification" }, text));
}

function renderRun(data, seq, at) {
  const before = runStatus;
  runStatus = data.status;
  if (FINISHED.has(data.status)) {
    const end = el("div", { class: "run-end", dataset: { status: data.status } });
    const badge = el("span", { class: "run-end-status status" });
    setRunStatusBadge(badge, data);
    const line = el("p", {}, "Run ended: ");
    line.append(badge);
    const time = timeNode(at, { className: "run-end-time muted" });
    if (time) line.append(" ", time);
    end.append(line, el("p", { class: "run-end-detail run-text" }, data.stop_detail || labels.stop[data.stop_reason] || ""));
    const old = timeline.querySelector(":scope > .run-end");
    if (old) old.replaceWith(end);
    else timeline.append(end);
  } else if (data.status !== before) {
    const note = el("div", { class: "run-note", dataset: { status: data.status } }, `Status: ${labels.run[data.status] || data.status}`);
    const time = timeNode(at);
    if (time) note.append(" · ", time);
    append(note);
  }
  if (seq > renderedSeq) updateHeader(data);
  showConnected();
}

function updateHeader(data) {
  setRunStatusBadge(document.getElementById("run-status"), data);
  const reason = document.getElementById("run-stop-reason");
  reason.dataset.stopReason = data.stop_reason || "";
  reason.textContent = labels.stop[data.stop_reason] || "—";
  document.getElementById("run-stop-detail").textContent = data.stop_detail || "";
  document.getElementById("run-answer").textContent = data.answer || "";
  const usage = data.usage || {};
  setCounters({
    iterations: data.iterations,
    tokensIn: usage.tokens_in,
    tokensOut: usage.tokens_out,
    tokensCached: usage.tokens_cached,
    tokensReasoning: usage.tokens_reasoning,
    compactions: usage.compactions,
    cost: usage.cost_usd,
    wall: data.wall_seconds,
  });
  const finished = FINISHED.has(data.status);
  // Stopping: the run has ended and its summary is being written; no lever applies any more.
  const ending = finished || data.status === "stopping";
  const cancel = document.getElementById("cancel-form");
  if (cancel) cancel.hidden = ending;
  const rerun = document.getElementById("rerun-form");
  if (rerun) rerun.hidden = !finished;
  leverControls(data.status, { finished: ending });
}

function setCounters({ iterations, tokensIn, tokensOut, tokensCached, tokensReasoning, compactions, cost, wall }) {
  if (iterations !== undefined) document.getElementById("run-iterations").textContent = String(iterations);
  if (tokensIn !== undefined) document.getElementById("run-tokens-in").textContent = String(tokensIn);
  if (tokensOut !== undefined) document.getElementById("run-tokens-out").textContent = String(tokensOut);
  if (tokensCached !== undefined) document.getElementById("run-tokens-cached").textContent = String(tokensCached);
  if (tokensReasoning !== undefined) document.getElementById("run-tokens-reasoning").textContent = String(tokensReasoning);
  if (compactions !== undefined) document.getElementById("run-compactions").textContent = String(compactions);
  if (cost !== undefined) document.getElementById("run-cost").textContent = Number(cost).toFixed(6);
  if (wall !== undefined) document.getElementById("run-wall-seconds").textContent = Number(wall).toFixed(1);
}

function counter(id) {
  return Number(document.getElementById(id).textContent) || 0;
}

function renderStepAndCounters(data, seq, at) {
  renderStep(data, seq, at);
  if (data.calls && data.calls.length && !resumeInFlight) argumentsSource.load(); // a live step
  if (seq > renderedSeq) {
    // "run" events come at the start, a pause and the end; between them, add up the steps.
    setCounters({
      iterations: Math.max(counter("run-iterations"), data.iteration || 0),
      tokensIn: counter("run-tokens-in") + (data.tokens_in || 0),
      tokensOut: counter("run-tokens-out") + (data.tokens_out || 0),
      tokensCached: counter("run-tokens-cached") + (data.tokens_cached || 0),
      tokensReasoning: counter("run-tokens-reasoning") + (data.tokens_reasoning || 0),
      compactions: counter("run-compactions") + (newlyCompacted(data) ? 1 : 0),
      cost: counter("run-cost") + (data.cost_usd || 0),
    });
  }
}

const RENDERERS = {
  run: renderRun,
  step: renderStepAndCounters,
  call: renderCall,
  approval: renderApproval,
  grant: renderGrant,
  verification: renderVerification,
  lever: (data, seq) => renderLever(data, { append, live: seq > renderedSeq }),
  fork: (data) => renderFork(data, { append }),
};

// --- the full result of a call -------------------------------------------------------------

timeline.addEventListener("click", async (click) => {
  const button = click.target.closest(".call-expand");
  if (!button) return;
  const li = button.closest(".call");
  const full = li.querySelector(":scope > .call-full");
  const preview = li.querySelector(":scope > .call-result");
  const show = (open) => {
    full.hidden = !open;
    if (preview) preview.hidden = open;
    button.textContent = open ? "Hide full result" : "Full result";
    button.setAttribute("aria-expanded", String(open));
  };
  if (!full.hidden) {
    show(false);
    return;
  }
  button.disabled = true;
  try {
    const url = callResultUrl.replace(/\/calls\/0\/result\/$/, `/calls/${encodeURIComponent(li.dataset.callPk)}/result/`);
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const body = await response.json();
    const head = el("p", { class: "call-full-head muted" }, "Full result, as the tool returned it");
    full.replaceChildren(head, jsonTree(body.result, { name: `the full result of ${body.tool}`, className: "call-full-json" }));
  } catch (error) {
    full.replaceChildren(el("p", { class: "error" }, `Could not load the full result: ${error.message}`));
  } finally {
    show(true);
    button.disabled = false;
  }
});

connect();
setInterval(() => {
  if (!resumeInFlight && document.visibilityState === "visible") resume();
}, CATCH_UP_MS);

// The run's waterfall: every model request, tool call, wait for a person, pause and operator note
// as a bar on one time axis, with the run's tokens and cost adding up beside it.
//
// It follows the "run:event"s run_live.js dispatches after applying each event (the replay of the
// stored events on every load, then the live ones), so a reload draws the same bars again. An
// event's `at` is when it was stored; each bar's length comes from the figures the events carry:
//   model request   [step at − latency_ms, step at], less the reads that ran before the step was
//                   stored (their calls arrive with the step, already done)
//   tool call       [done at − latency_ms, done at]
//   approval wait   [call awaiting approval at, the approval's decided_at]
//   pause, queued   [run paused (queued) at, its next status at]
// What is still going on (a wait, a call, the model writing its next answer) grows until now.
// All text goes in through textContent.
import { el } from "./dom.js";

const section = document.getElementById("run-waterfall");
const groups = readJson("status-groups");
const RUN_FINISHED = new Set(groups.run_finished || []);
const CALL_DONE = new Set(groups.call_done || []);
const CALL_LABELS = readJson("call-status-labels");
// While the run is in one of these, a driver is asking the model whenever no call is open.
const ASKING = new Set(["running", "stopping"]);
const TICK_GAP_PX = 16; // at least between two labels of the time axis
const TICK_SPACING_PX = 64; // at least between two ticks: an axis to read at a glance, not a ruler
// Steps between the axis's ticks: 1-2-5 from a millisecond, so a 58 ms run gets an axis of 60 ms
// in steps of 10 ms, not a second in which its calls are specks.
const NICE_STEPS_MS = [
  1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 15000, 30000, 60000, 120000, 300000,
  600000, 900000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000,
];
const REDUCED_MOTION = window.matchMedia("(prefers-reduced-motion: reduce)");

function readJson(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : {};
}

// --- what the events say, as spans -------------------------------------------------------------

const spans = new Map(); // key -> {key, kind, order, start, end (null while open), ...}
const steps = new Map(); // step index -> {tokensIn, tokensOut, cost}
const calls = new Map(); // call pk -> {tool, step, status}
const approvalKey = new Map(); // call pk -> key of its latest approval wait
const leverCount = new Map(); // lever -> how many the timeline shows so far (to find the nth)
let created = 0; // spans made so far: ties on the time axis keep the order things arrived in
let firstAt = null; // the run's first event: the time axis starts here
let runStatus = null;
let askingSince = null; // when the run last became running
let finishedAt = null;
let copying = false; // a fork's copied steps arrive between its "fork" and its first "run" event
const copied = { steps: [], parent: null };
let openPause = null;
let openQueue = null;
let queuedCount = 0; // the timeline's "Status: Queued" notes so far
let latestAt = 0; // the newest event's time

function spanSet(key, fields) {
  const span = spans.get(key);
  if (span) return Object.assign(span, fields);
  const made = { key, order: created++, ...fields };
  spans.set(key, made);
  return made;
}

function stepTarget(index) {
  return () => document.getElementById(`step-${index}`);
}

function callTarget(pk, part = null) {
  return () => {
    const li = document.querySelector(`#timeline li.call[data-call-pk="${CSS.escape(String(pk))}"]`);
    return (part && li && li.querySelector(part)) || li;
  };
}

function leverTarget(lever, nth) {
  return () => document.querySelectorAll(`#timeline [data-lever="${CSS.escape(lever)}"]`)[nth] || null;
}

function onStep(data, at) {
  steps.set(data.index, {
    tokensIn: data.tokens_in || 0, tokensOut: data.tokens_out || 0, cost: data.cost_usd || 0,
  });
  for (const call of data.calls || []) calls.set(call.pk, { tool: call.tool, step: data.index, status: call.status });
  if (copying) {
    copied.steps.push(data.index);
    return;
  }
  const key = `step-${data.index}`;
  if (spans.has(key)) return; // sent again when it changes: its time is the first one
  // Calls that only read ran before their step was stored (in parallel, or one alone): the
  // answer came that much earlier, and they ran right after it.
  const early = (data.calls || []).filter((c) => CALL_DONE.has(c.status) && c.latency_ms !== null && c.latency_ms !== undefined);
  const answeredAt = at - Math.max(0, ...early.map((c) => c.latency_ms));
  spanSet(key, {
    kind: "model", start: answeredAt - (data.latency_ms || 0), end: answeredAt, step: data.index,
    model: data.model || "", summary: data.kind === "summary", target: stepTarget(data.index),
  });
  for (const call of data.calls || []) {
    if (early.includes(call)) callSpan(call, answeredAt, answeredAt + call.latency_ms);
    else if (CALL_DONE.has(call.status)) callSpan(call, answeredAt, answeredAt); // refused: never ran
  }
}

function callSpan(call, start, end) {
  const known = calls.get(call.pk) || {};
  return spanSet(`call-${call.pk}`, {
    kind: "call", start, end, tool: call.tool || known.tool || "", step: known.step, status: call.status,
    ran: call.latency_ms !== null && call.latency_ms !== undefined, target: callTarget(call.pk),
  });
}

function onCall(data, at) {
  const known = calls.get(data.pk) || { tool: data.tool, step: null };
  calls.set(data.pk, { ...known, tool: data.tool || known.tool, status: data.status });
  if (data.approval) onApproval({ call_pk: data.pk, ...data.approval }, at);
  const key = `call-${data.pk}`;
  if (data.status === "awaiting_approval") {
    const current = spans.get(approvalKey.get(data.pk));
    if (!current || current.end !== null) openApproval(data.pk, at);
  } else if (data.status === "approved" || data.status === "started") {
    // About to run or running: open until its result, which then says how long it took.
    const span = spans.get(key);
    if (!span || span.end === null) callSpan(data, span ? span.start : at, null);
  } else if (CALL_DONE.has(data.status)) {
    if (data.latency_ms !== null && data.latency_ms !== undefined) callSpan(data, at - data.latency_ms, at);
    else callSpan(data, at, at); // rejected or not executed: a mark where it ended
  }
}

function openApproval(callPk, at) {
  const count = [...spans.values()].filter((s) => s.kind === "approval" && s.call === callPk).length;
  const key = `approval-${callPk}${count ? `-${count + 1}` : ""}`; // asked again after a crash
  approvalKey.set(callPk, key);
  spanSet(key, {
    kind: "approval", start: at, end: null, call: callPk, tool: (calls.get(callPk) || {}).tool || "",
    target: callTarget(callPk, ".call-approval"),
  });
}

function onApproval(data, at) {
  const span = spans.get(approvalKey.get(data.call_pk));
  // Decided without a wait (a rule, a grant, the run's policy): there is no wait to draw.
  if (!span || span.end !== null || data.status === "pending") return;
  const decided = Date.parse(data.decided_at);
  Object.assign(span, {
    end: Math.max(span.start, Number.isNaN(decided) ? at : decided),
    status: data.status, decidedBy: data.decided_by || "",
  });
}

function onRun(data, at) {
  const before = runStatus;
  runStatus = data.status;
  copying = false; // the fork's own first "run" event comes after its copies
  if (ASKING.has(runStatus) && !ASKING.has(before)) askingSince = at;
  if (runStatus !== before && runStatus === "queued") queuedCount += 1;
  if (openQueue && runStatus !== "queued") {
    openQueue.end = at;
    openQueue = null;
  }
  if (runStatus === "queued" && !openQueue) {
    // Waiting for a worker: at the start, and after a resume.
    const nth = queuedCount - 1;
    openQueue = spanSet(`queued-${at}`, {
      kind: "queued", start: at, end: null,
      target: () => document.querySelectorAll('#timeline .run-note[data-status="queued"]')[nth] || null,
    });
  }
  if (openPause && runStatus !== "paused") {
    openPause.end = at;
    openPause = null;
  }
  if (runStatus === "paused" && !openPause) {
    openPause = spanSet(`pause-${at}`, { kind: "pause", start: at, end: null, by: "", target: leverTarget("paused", leverCount.get("paused") || 0) });
  }
  if (RUN_FINISHED.has(runStatus)) {
    finishedAt = at;
    for (const span of spans.values()) if (span.end === null) span.end = Math.max(span.start, at);
  }
}

function onLever(data, at, seq) {
  const nth = leverCount.get(data.lever) || 0;
  leverCount.set(data.lever, nth + 1); // the timeline shows copied notes too
  if (copying) return;
  const when = Date.parse(data.at);
  const moment = Number.isNaN(when) ? at : when;
  if (data.lever === "paused") {
    if (openPause) Object.assign(openPause, { by: data.by || "", target: leverTarget("paused", nth) });
  } else if (data.lever === "resume") {
    if (openPause) openPause.end = Math.max(openPause.start, moment);
    openPause = null;
  } else if (data.lever === "message" || data.lever === "pause" || data.lever === "stop") {
    spanSet(`lever-${seq}`, {
      kind: "note", lever: data.lever, start: moment, end: moment, by: data.by || "", text: data.text || "",
      target: leverTarget(data.lever, nth),
    });
  }
}

function onEvent(event) {
  const at = Date.parse(event.at);
  if (Number.isNaN(at)) return;
  latestAt = Math.max(latestAt, at);
  if (firstAt === null) firstAt = at;
  const data = event.data || {};
  if (event.kind === "step") onStep(data, at);
  else if (event.kind === "call") onCall(data, at);
  else if (event.kind === "approval") onApproval(data, at);
  else if (event.kind === "run") onRun(data, at);
  else if (event.kind === "lever") onLever(data, at, event.seq);
  else if (event.kind === "fork") {
    copying = true;
    copied.parent = data.parent;
  }
  scheduleRender();
}

// What is open grows until this browser's clock says now: never before the newest event (a clock
// behind the server's), so an open bar never shrinks; a clock ahead lengthens it by as much.
const clockNow = () => Math.max(Date.now(), latestAt);

// The model's next answer, while the run is asking for it: from the end of what ran last.
function modelWaiting(now) {
  if (!ASKING.has(runStatus) || finishedAt !== null || askingSince === null) return null;
  if ([...calls.values()].some((call) => !CALL_DONE.has(call.status))) return null;
  if ([...spans.values()].some((span) => span.end === null)) return null;
  let start = askingSince;
  for (const span of spans.values()) if (span.kind === "model" || span.kind === "call") start = Math.max(start, span.end);
  return { key: "model-waiting", kind: "waiting", order: created, start: Math.min(start, now), end: null };
}

// --- words -----------------------------------------------------------------------------------

function duration(ms) {
  const value = Math.max(0, ms);
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 10000) return `${(value / 1000).toFixed(1)} s`;
  const s = Math.round(value / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  const min = Math.floor((s % 3600) / 60);
  return `${Math.floor(s / 3600)} h${min ? ` ${min} min` : ""}`;
}

// A tick's label: in ms on the axis of a run shorter than a second, else in seconds with the
// decimals the step needs (0.25 s, 1.5 s), then in minutes and hours.
function tickText(ms, step, length) {
  if (ms === 0) return "0";
  if (length < 1000) return `${ms} ms`;
  if (step < 1000) return `${(ms / 1000).toFixed(step % 100 ? (step % 10 ? 3 : 2) : 1)} s`;
  if (ms < 60000) return `${Math.round(ms / 1000)} s`;
  return duration(ms);
}

const usd = (value) => `$${Number(value || 0).toFixed(6)}`;
const count = (value) => Number(value || 0).toLocaleString("en");

// A row's words: its visible `name` and `detail`, with `what` it is and its `context` for
// screen readers (a row's button is named by its text, what is seen and more), and all of it in
// one sentence for the tooltip (`words`).
function describe(span, now, t0) {
  const took = duration((span.end === null ? now : span.end) - span.start);
  const at = `+${duration(span.start - t0)}`;
  const soFar = span.end === null ? " so far" : "";
  const row = (name, what, detail, context, words) => ({ name, what, detail, context, words });
  if (span.kind === "model") {
    const name = span.summary ? `Step ${span.step} · summary` : `Step ${span.step}`;
    return row(name, ", model request:", `${took} · ${span.model}`, `, from ${at}. Opens step ${span.step}.`,
      `${name}: model ${span.model} ${took}, from ${at}.`);
  }
  if (span.kind === "call") {
    const status = (CALL_LABELS[span.status] || span.status || "running").toLowerCase();
    const what = `, tool call${span.step ? ` of step ${span.step}` : ""}:`;
    if (!span.ran && span.end !== null) {
      return row(span.tool, what, `${status}, not run`, `, at ${at}. Opens the call.`,
        `Call ${span.tool}: not run, ${status}, at ${at}.`);
    }
    const state = span.end === null ? "running" : status;
    const shownState = span.status === "succeeded" ? "" : ` · ${state}`;
    return row(span.tool, what, `${took}${soFar}${shownState}`, `, from ${at}. Opens the call.`,
      `Call ${span.tool}: ${took}${soFar}, ${state}, from ${at}.`);
  }
  if (span.kind === "approval") {
    const how = span.end === null ? "waiting" : `${span.status || "decided"}${span.decidedBy ? ` by ${span.decidedBy}` : ""}`;
    const decided = span.end === null ? "still waiting" : `${span.status || "decided"}${span.decidedBy ? `, decided by ${span.decidedBy}` : ""}`;
    return row("Approval", ", a wait for a person:", `${took}${soFar} · ${how} · ${span.tool}`, `, from ${at}. Opens the call.`,
      `Approval of ${span.tool} waited ${took}${soFar}, ${decided}, from ${at}.`);
  }
  if (span.kind === "pause") {
    const by = span.by ? ` by ${span.by}` : "";
    return row("Paused", ":", `${took}${soFar}${by}`, `, from ${at}. Opens the pause in the timeline.`,
      `Paused${by} for ${took}${soFar}, from ${at}.`);
  }
  if (span.kind === "queued") {
    return row("Queued", " for a worker:", `${took}${soFar}`, `, from ${at}. Opens it in the timeline.`,
      `Queued for a worker ${took}${soFar}, from ${at}.`);
  }
  if (span.kind === "note") {
    const name = { message: "Note", pause: "Pause asked", stop: "Stop asked" }[span.lever];
    const text = span.text ? `: ${span.text.length > 80 ? `${span.text.slice(0, 79)}…` : span.text}` : "";
    return row(name, "", `by ${span.by}`, ` at ${at}${text}. Opens it in the timeline.`, `${name} by ${span.by} at ${at}${text}`);
  }
  return row("Model", "", `answering · ${took} so far`, "", `The model is writing its next answer: ${took} so far, from ${at}.`);
}

// --- drawing ---------------------------------------------------------------------------------

const chart = section && section.querySelector(".wf-chart");
const list = section && section.querySelector(".wf-rows");
const axis = section && section.querySelector(".wf-axis-track");
const rows = new Map(); // span key -> li
let current = null; // key of the row whose button takes the Tab key (one stop for the whole chart)
let frame = 0;

function scheduleRender() {
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

function orderedSpans(now) {
  const all = [...spans.values()];
  const waiting = modelWaiting(now);
  if (waiting) all.push(waiting);
  return all.sort((a, b) => a.start - b.start || a.order - b.order);
}

const measureContext = document.createElement("canvas").getContext("2d");

function labelWidth(text) {
  const style = getComputedStyle(axis);
  measureContext.font = `${style.fontSize} ${style.fontFamily}`;
  return measureContext.measureText(text).width;
}

// The time axis fits the run: it ends at the first tick at or after the run's end (now, while it
// goes on). Of the first few steps whose labels fit the width (as measured), the one that ends the
// axis nearest the run's end.
function axisScale(took, width) {
  const fitting = [];
  for (const step of NICE_STEPS_MS) {
    const intervals = Math.ceil(took / step);
    if (intervals > width / TICK_SPACING_PX) continue;
    const length = intervals * step;
    let widest = 0;
    for (let n = 0; n <= intervals; n++) widest = Math.max(widest, labelWidth(tickText(n * step, step, length)));
    if (width / intervals >= widest + TICK_GAP_PX) fitting.push({ step, length });
    if (fitting.length === 3) break;
  }
  if (!fitting.length) {
    const step = NICE_STEPS_MS.at(-1);
    return { step, length: Math.ceil(took / step) * step };
  }
  return fitting.reduce((best, one) => (one.length < best.length ? one : best));
}

function render() {
  const now = clockNow();
  const shown = orderedSpans(now);
  const t0 = Math.min(firstAt ?? now, ...shown.map((s) => s.start));
  let t1 = finishedAt ?? now;
  for (const span of shown) t1 = Math.max(t1, span.end ?? now);
  const { step, length } = axisScale(Math.max(t1 - t0, 1), axis.getBoundingClientRect().width || 600);
  const pct = (ms) => `${((ms / length) * 100).toFixed(3)}%`;
  chart.style.setProperty("--wf-tick", pct(step));
  axis.dataset.endMs = String(length);

  const ticks = [];
  for (let n = 0; n * step <= length; n++) {
    ticks.push(el("span", { class: "wf-tick", dataset: { ms: String(n * step) } }, tickText(n * step, step, length)));
  }
  ticks.forEach((tick, n) => { tick.style.left = pct(n * step); });
  axis.replaceChildren(...ticks);

  const sums = runningTotals();
  const keys = new Set(shown.map((s) => s.key));
  for (const [key, li] of rows) if (!keys.has(key)) {
    li.remove();
    rows.delete(key);
  }
  const wanted = shown.map((span) => {
    const li = rows.get(span.key) || newRow(span);
    fillRow(li, span, { now, t0, pct, sum: span.kind === "model" ? sums.get(span.step) : null });
    return li;
  });
  if (wanted.some((li, n) => list.children[n] !== li)) {
    const focused = document.activeElement && document.activeElement.closest(".wf-row");
    list.replaceChildren(...wanted);
    if (focused && focused.isConnected) focused.querySelector(".wf-hit").focus({ preventScroll: true });
  }
  rovingTabStop();
  section.querySelector(".wf-empty").hidden = shown.length > 0;
  chart.hidden = shown.length === 0;
  fillTotals(shown, now, t0, t1);
}

// A whole row is one button (a bar alone is too small a target), named by its text.
function newRow(span) {
  const li = el("li", { class: `wf-row wf-row-${span.kind}`, dataset: { key: span.key, kind: span.kind } });
  const hit = span.target ? el("button", { type: "button", class: "wf-hit", tabindex: "-1" }) : el("div", { class: "wf-hit" });
  const bar = el("span", { class: `wf-bar wf-bar-${span.kind}`, role: span.target ? null : "img" });
  const label = el("span", { class: "wf-label" });
  label.append(el("span", { class: "wf-name" }), el("span", { class: "wf-what visually-hidden" }), " ",
    el("span", { class: "wf-detail muted" }), el("span", { class: "wf-context visually-hidden" }));
  const track = el("span", { class: "wf-track" });
  track.append(bar);
  hit.append(label, track, el("span", { class: "wf-sum muted" }));
  li.append(hit);
  rows.set(span.key, li);
  return li;
}

function fillRow(li, span, { now, t0, pct, sum }) {
  const words = describe(span, now, t0);
  li.querySelector(".wf-name").textContent = words.name;
  li.querySelector(".wf-name").classList.toggle("mono", span.kind === "call");
  li.querySelector(".wf-detail").textContent = words.detail;
  li.querySelector(".wf-what").textContent = words.what;
  li.querySelector(".wf-context").textContent = words.context;
  li.querySelector(".wf-sum").textContent = sum ? `Σ ${count(sum.tokens)} tokens · ${usd(sum.cost)}` : "";
  const bar = li.querySelector(".wf-bar");
  const end = span.end ?? Math.max(now, span.start);
  bar.style.left = `min(${pct(span.start - t0)}, calc(100% - 4px))`;
  bar.style.width = pct(end - span.start);
  li.querySelector(".wf-hit").title = words.words;
  if (!span.target) bar.setAttribute("aria-label", words.words); // an image of a bar: nothing to open
  bar.classList.toggle("wf-open", span.end === null);
  bar.classList.toggle("wf-not-run", span.kind === "call" && !span.ran && span.end !== null);
  bar.classList.toggle("wf-bad", ["failed", "unknown", "rejected", "expired", "closed"].includes(span.status));
  // Offsets from the run's first event, for tests and for anyone reading the page's source.
  bar.dataset.startMs = (span.start - t0).toFixed(1);
  bar.dataset.endMs = span.end === null ? "" : (span.end - t0).toFixed(1);
  if (span.step !== undefined && span.step !== null) bar.dataset.step = String(span.step);
  if (span.kind === "call" && span.key.startsWith("call-")) bar.dataset.callPk = span.key.slice(5);
  if (span.kind === "approval") bar.dataset.callPk = String(span.call);
}

// Tokens and cost up to and including each step (copied steps count towards the first drawn one).
function runningTotals() {
  const sums = new Map();
  let tokens = 0;
  let cost = 0;
  for (const index of [...steps.keys()].sort((a, b) => a - b)) {
    const step = steps.get(index);
    tokens += step.tokensIn + step.tokensOut;
    cost += step.cost;
    sums.set(index, { tokens, cost });
  }
  return sums;
}

// How long the intervals cover together: parallel calls count once.
function covered(intervals) {
  let total = 0;
  let reach = -Infinity;
  for (const [start, end] of intervals.sort((a, b) => a[0] - b[0])) {
    if (end > reach) total += end - Math.max(start, reach);
    reach = Math.max(reach, end);
  }
  return total;
}

function fillTotals(shown, now, t0, t1) {
  const of = (kind) => shown.filter((s) => s.kind === kind).map((s) => [s.start, s.end ?? Math.max(now, s.start)]);
  let tokensIn = 0;
  let tokensOut = 0;
  let cost = 0;
  for (const step of steps.values()) {
    tokensIn += step.tokensIn;
    tokensOut += step.tokensOut;
    cost += step.cost;
  }
  const figures = [
    ["tokens", "Tokens", `${count(tokensIn)} in / ${count(tokensOut)} out`],
    ["cost", "Cost", usd(cost)],
    ["model", "Model", duration(covered([...of("model"), ...of("waiting")]))],
    ["tools", "Tools", duration(covered(of("call")))],
    ["people", "Waiting for people", duration(covered(of("approval")))],
    ["paused", "Paused", duration(covered(of("pause")))],
    ["queued", "Queued", duration(covered(of("queued")))],
    ["elapsed", finishedAt === null ? "So far" : "Whole run", duration(t1 - t0)],
  ];
  // Folded, the card still says what the run has used so far.
  section.querySelector(".wf-brief").textContent =
    `${count(tokensIn + tokensOut)} tokens · ${usd(cost)} · ${duration(t1 - t0)}${finishedAt === null ? " so far" : ""}`;
  const totals = section.querySelector(".wf-totals");
  totals.replaceChildren(...figures.map(([name, label, value]) => {
    const item = el("div", { dataset: { total: name } });
    item.append(el("dt", {}, label), el("dd", {}, value));
    return item;
  }));
  const note = section.querySelector(".wf-copied");
  note.hidden = copied.steps.length === 0;
  if (copied.steps.length) {
    const first = copied.steps[0];
    const last = copied.steps.at(-1);
    const which = first === last ? `Step ${first} was` : `Steps ${first}–${last} were`;
    note.textContent = `${which} copied from run ${copied.parent}: their tokens and cost count here, their times are in that run's waterfall.`;
  }
}

// --- keys and clicks -------------------------------------------------------------------------

function rowButtons() {
  return [...list.querySelectorAll("button.wf-hit")];
}

function rovingTabStop() {
  const all = rowButtons();
  const keep = all.find((button) => button.closest(".wf-row").dataset.key === current) || all[0];
  for (const button of all) button.tabIndex = button === keep ? 0 : -1;
}

function moveFocus(from, where) {
  const all = rowButtons();
  const here = all.indexOf(from);
  const next = { first: 0, last: all.length - 1, next: Math.min(here + 1, all.length - 1), previous: Math.max(here - 1, 0) }[where];
  const button = all[next];
  if (!button) return;
  current = button.closest(".wf-row").dataset.key;
  rovingTabStop();
  button.focus();
}

const KEYS = { ArrowDown: "next", ArrowRight: "next", ArrowUp: "previous", ArrowLeft: "previous", Home: "first", End: "last" };

function openTarget(key) {
  const span = spans.get(key);
  const node = span && span.target && span.target();
  if (!node) return;
  const folded = node.closest("details:not([open])");
  if (folded) folded.open = true;
  if (!node.hasAttribute("tabindex")) node.setAttribute("tabindex", "-1");
  node.scrollIntoView({ block: "center", behavior: REDUCED_MOTION.matches ? "auto" : "smooth" });
  node.focus({ preventScroll: true });
  node.classList.add("wf-target");
  setTimeout(() => node.classList.remove("wf-target"), 2000);
}

const OPEN_KEY = "run-waterfall-open"; // the reader's choice, for every run page

function rememberOpen(details) {
  try {
    details.open = localStorage.getItem(OPEN_KEY) === "true";
  } catch {
    // Storage refused (private mode, a policy): it starts folded each time.
  }
  details.addEventListener("toggle", () => {
    try {
      localStorage.setItem(OPEN_KEY, String(details.open));
    } catch {
      // As above: nothing to remember it in.
    }
    scheduleRender();
  });
}

if (section) {
  section.querySelector(".wf-static").hidden = true;
  rememberOpen(section.querySelector(".wf-details"));
  list.addEventListener("click", (click) => {
    const button = click.target.closest("button.wf-hit");
    if (!button) return;
    current = button.closest(".wf-row").dataset.key;
    rovingTabStop();
    openTarget(current);
  });
  list.addEventListener("focusin", (focus) => {
    const button = focus.target.closest("button.wf-hit");
    if (!button) return;
    current = button.closest(".wf-row").dataset.key;
    rovingTabStop();
  });
  list.addEventListener("keydown", (key) => {
    const button = key.target.closest("button.wf-hit");
    if (!button || !KEYS[key.key]) return;
    key.preventDefault();
    moveFocus(button, KEYS[key.key]);
  });
  document.addEventListener("run:event", (event) => onEvent(event.detail));
  // What is open grows with the clock; the axis labels follow the chart's width.
  setInterval(() => {
    if (finishedAt === null && runStatus !== null && document.visibilityState === "visible") scheduleRender();
  }, 1000);
  new ResizeObserver(scheduleRender).observe(chart.parentElement);
}

// Operators' levers on the run page: the timeline's "lever" events (pause, paused, resume,
// message, stop) and the state they leave in the header (paused by whom, pausing, stopping),
// and which lever buttons an operator sees. Built from the run's events only, like the rest of
// the timeline; all text goes in through textContent.
import { el, timeNode, when } from "./dom.js";

const byId = (id) => document.getElementById(id);

// The lines of the events the run records itself; each lever's line comes with its declaration
// (runs/controls/levers.py), in the page's #lever-lines.
const LINES = {
  paused: "Paused by",
  held: "Held before its start by",
  ...JSON.parse(byId("lever-lines")?.textContent || "{}"),
};

// The timeline entry of one lever event.
function leverNode(data) {
  const by = data.by || "an operator";
  if (data.lever === "message") {
    const node = el("div", { class: "operator-message", dataset: { lever: "message", by } });
    const head = el("div", { class: "operator-message-head muted" }, `Message from operator ${by} · `);
    head.append(timeNode(data.at) || "");
    node.append(head, el("div", { class: "operator-message-text run-text" }, data.text || ""));
    return node;
  }
  const node = el("div", { class: `lever lever-${data.lever}`, dataset: { lever: data.lever, by } });
  node.append(`${LINES[data.lever] || `${data.lever} by`} ${by} at `, timeNode(data.at) || "an unknown time");
  if (data.text) node.append(`: ${data.text}`); // a budget's sentence
  return node;
}

function show(id, visible) {
  const node = byId(id);
  if (node) node.hidden = !visible;
}

function setPausedBy(data) {
  const name = byId("paused-by");
  const at = byId("paused-at");
  if (name) name.textContent = data.by || "an operator";
  if (at) {
    at.textContent = when(data.at);
    if (data.at) at.setAttribute("datetime", data.at);
  }
}

// The lever buttons of the run page (templates/runs/_lever_form.html), each with its lever's
// declared data: data-lever (its name), data-shown-when ("active", "paused" or "unpaused") and,
// for a lever that is asked once, data-asked ("true" once pulled: its form stays hidden until
// that is over). The button's form is what shows or hides.
function leverButtons() {
  return document.querySelectorAll("#run-levers button[data-lever]");
}

// The header's lever state after an event newer than the rendered page.
function leverState(data) {
  for (const button of leverButtons()) {
    if (button.dataset.lever === data.lever && button.dataset.asked !== undefined) {
      button.dataset.asked = "true";
      button.form.hidden = true;
    }
  }
  if (data.lever === "pause") {
    setPausedBy(data); // a run nobody drives is paused at once, with this name
    show("run-pause-requested", true);
  } else if (data.lever === "paused" || data.lever === "held") {
    if (data.lever === "paused") setPausedBy(data);
    show("run-pause-requested", false);
    show("run-paused", data.lever === "paused");
    const sentence = byId("run-budget-sentence");
    if (sentence && data.text) sentence.textContent = data.text;
    show("run-budget", Boolean(data.text));
  } else if (data.lever === "resume") {
    show("run-budget", false);
  } else if (data.lever === "stop") {
    const by = byId("stop-requested-by");
    if (by) by.textContent = data.by || "an operator";
    show("run-stop-requested", true);
  }
}

const EDITS = {
  tool_result: (data) => `the result of call ${data.call_id} was changed`,
  answer: () => "the model's answer of that step was changed",
  message: () => "an operator message was added",
};

// The first entry of a fork's timeline: where its copied conversation comes from.
export function renderFork(data, { append }) {
  const edit = EDITS[data.edit];
  const node = el("div", { class: "lever fork-origin", dataset: { parent: data.parent, step: data.step } });
  node.append(`Forked by ${data.by || "an operator"} at `, timeNode(data.at) || "an unknown time",
    ` from step ${data.step} of run ${data.parent}${edit ? `; ${edit(data)}` : ""}. The copied steps below were not run again.`);
  // The fork runs with its agent's settings as they were when it was made: what differed from the parent's.
  const differences = Array.isArray(data.differences) ? data.differences : [];
  if (differences.length) {
    node.append(el("span", { class: "fork-differences" },
      ` Its settings differ from run ${data.parent}'s: ${differences.join("; ")}.`));
  }
  append(node);
}

// `append(node)` puts a node in the timeline; `live` is true for events newer than the rendered page.
export function renderLever(data, { append, live }) {
  append(leverNode(data));
  if (live) leverState(data);
}

// Which levers an operator sees for a run in `status` (the elements exist only for operators).
export function leverControls(status, { finished }) {
  const paused = status === "paused";
  show("run-levers", !finished);
  show("run-paused", paused);
  if (paused || finished) show("run-pause-requested", false);
  if (finished) show("run-stop-requested", false);
  for (const button of leverButtons()) {
    if (button.dataset.shownWhen === "paused") {
      button.form.hidden = !paused;
    } else if (button.dataset.shownWhen === "unpaused") {
      // Paused, or over: what was asked of it is done. Resumed: it can be pulled again (unless
      // it already was and that is on its way).
      if ((paused || finished) && button.dataset.asked !== undefined) button.dataset.asked = "false";
      button.form.hidden = finished || paused || button.dataset.asked === "true";
    }
  }
}

// A form that ends the run (data-confirm) asks first, next to its button: the first press shows
// what will happen and a "Yes" button that sends the form; "Keep it running" takes it back.
// Without JavaScript the form is sent at once.
export function confirmEndings() {
  for (const form of document.querySelectorAll("#run-levers form[data-confirm]")) {
    const button = form.querySelector("button[type=submit]");
    const box = el("div", { class: "confirm-box", role: "group", "aria-label": `Confirm: ${button.textContent}`, hidden: true });
    const yes = el("button", { type: "submit", class: "danger confirm-yes", dataset: { confirmed: "true" } }, `Yes: ${button.textContent.toLowerCase()}`);
    const no = el("button", { type: "button", class: "confirm-no" }, "Keep it running");
    box.append(el("p", { "aria-live": "polite" }, form.dataset.confirm), yes, no);
    button.after(box);
    no.addEventListener("click", () => {
      box.hidden = true;
      button.hidden = false;
      button.focus();
    });
    form.addEventListener("submit", (submit) => {
      if (submit.submitter && submit.submitter.dataset.confirmed === "true") return;
      submit.preventDefault();
      button.hidden = true;
      box.hidden = false;
      yes.focus();
    });
  }
}

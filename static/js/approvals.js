// The approval queue (and one approval's page): the list is refetched whenever the socket says
// approvals changed, and decisions are posted with fetch, so nothing needs a page reload.
import { subscribe } from "./badge.js";
import { installBulk } from "./approvals_bulk.js";
import { installQueueKeys } from "./queue_keys.js";
import { argumentErrors } from "./schema_check.js";

const live = document.getElementById("approval-live");
const flash = document.getElementById("approval-flash");
const liveStatus = document.getElementById("approval-live-status");
const keys = installQueueKeys({ live, help: document.getElementById("keys-help") });
document.getElementById("keys-help-button")?.addEventListener("click", () => keys.toggleHelp());

// `announce`: false when the same answer is announced beside the card (once is enough).
function showMessage(text, level = "info", { announce = true } = {}) {
  if (!flash || !text) return;
  const item = document.createElement("li");
  item.className = `msg-${level}`;
  if (!announce) item.setAttribute("aria-hidden", "true");
  item.textContent = text;
  flash.prepend(item);
  while (flash.children.length > 5) flash.lastElementChild.remove();
}

// The answer to a decision also goes where the person acted: in its card, or, once the card has
// left the list (decided), where the card was, for ANSWER_MS. Announced there (role=status); the
// list at the top keeps the last few for a person who scrolled away.
const ANSWER_MS = 30000;
const answers = new Map(); // approval id -> {text, level, after: id of the card above, at}

function noteAnswer(id, text, level) {
  if (!text) return;
  const cards = [...live.querySelectorAll(".approval[data-approval-id]")];
  const index = cards.findIndex((card) => card.dataset.approvalId === id);
  const after = index > 0 ? cards[index - 1].dataset.approvalId : null;
  answers.set(id, { text, level, after, at: Date.now() });
  placeAnswers();
}

function placeAnswers() {
  const now = Date.now();
  for (const [id, answer] of answers) {
    let node = document.getElementById(`answer-${id}`);
    if (now - answer.at > ANSWER_MS) {
      answers.delete(id);
      node?.remove();
      continue;
    }
    if (!node) {
      node = document.createElement("p");
      node.id = `answer-${id}`;
      node.setAttribute("role", "status");
    }
    node.className = `card-answer msg-${answer.level}`;
    node.dataset.approvalId = id;
    node.textContent = answer.text;
    const card = cardById(id);
    if (card) {
      const rows = card.querySelectorAll(".decide-row");
      (rows.length ? rows[rows.length - 1] : card.lastElementChild).after(node);
    } else {
      const above = answer.after && cardById(answer.after);
      const list = live.querySelector("#approval-list") || live;
      if (above) above.after(node);
      else list.prepend(node);
      // The card the person acted on left (a tall one, with its evidence): its answer, now where
      // the card began, is brought into view once, so they read what happened without scrolling.
      if (!answer.moved) {
        answer.moved = true;
        node.scrollIntoView({ block: "nearest" });
      }
    }
  }
}
setInterval(placeAnswers, 5000);

function csrfToken(form) {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  if (cookie) return decodeURIComponent(cookie.slice("csrftoken=".length));
  return form.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
}

function cardOf(element) {
  return element.closest(".approval[data-approval-id]");
}

function cardById(id) {
  return live.querySelector(`.approval[data-approval-id="${CSS.escape(id)}"]`);
}

// What the operator has typed, opened or selected in one card: a refresh must not lose it.
const KEPT_FIELDS = ["input[name=reason]", "input[name=guidance]", "textarea.edit-arguments", "textarea.nudge-reason"];

// What a person opened on a card (a result the model read, the check's whole answer) stays open
// when the list is fetched again: a refresh must not close what they are reading.
function detailsKey(details) {
  if (details.matches(".state-answer")) return "state";
  const entry = details.closest(".read-entry");
  return entry ? `read:${[...entry.parentElement.children].indexOf(entry)}` : null;
}

function cardState(card) {
  const fields = {};
  for (const selector of KEPT_FIELDS) {
    const field = card.querySelector(selector);
    if (field && field.value !== field.defaultValue) fields[selector] = field.value;
  }
  return {
    fields,
    editOpen: Boolean(card.querySelector("details.edit-args")?.open),
    openDetails: [...card.querySelectorAll("details[open]:not(.edit-args)")].map(detailsKey).filter(Boolean),
    selected: Boolean(card.querySelector("input.select-approval")?.checked),
    // The twins confirmed by name: kept only while the card names the same twins (its value lists them).
    twinsConfirmed: card.querySelector("input.confirm-twins:checked")?.value || "",
    editError: card.querySelector(".edit-error:not([hidden])")?.textContent || "",
  };
}

function restoreCard(card, state) {
  for (const [selector, value] of Object.entries(state.fields)) {
    const field = card.querySelector(selector);
    if (field) field.value = value;
  }
  const edit = card.querySelector("details.edit-args");
  if (edit && state.editOpen) setEditOpen(edit, true);
  for (const details of card.querySelectorAll("details:not(.edit-args)")) {
    if (state.openDetails.includes(detailsKey(details))) details.open = true;
  }
  const box = card.querySelector("input.select-approval");
  if (box) box.checked = state.selected;
  const twins = card.querySelector("input.confirm-twins");
  if (twins && state.twinsConfirmed && twins.value === state.twinsConfirmed) twins.checked = true;
  if (state.editError) showEditError(card, state.editError);
}

// A budget request's raise form (the run's card at the top of the list): what was typed or chosen.
function budgetFormsState() {
  const kept = new Map();
  for (const card of live.querySelectorAll(".budget-request[data-run-id]")) {
    const state = {};
    for (const field of card.querySelectorAll("input.budget-limit, input.budget-until")) {
      if (field.value !== field.defaultValue) state[field.name] = field.value;
    }
    const chosen = card.querySelector("input[name=applies_to]:checked");
    if (chosen && !chosen.defaultChecked) state.applies_to = chosen.value;
    kept.set(card.dataset.runId, state);
  }
  return kept;
}

function restoreBudgetForms(kept) {
  for (const card of live.querySelectorAll(".budget-request[data-run-id]")) {
    const state = kept.get(card.dataset.runId);
    if (!state) continue;
    for (const [name, value] of Object.entries(state)) {
      if (name === "applies_to") {
        const radio = card.querySelector(`input[name=applies_to][value="${CSS.escape(value)}"]`);
        if (radio) radio.checked = true;
      } else {
        const field = card.querySelector(`input[name="${CSS.escape(name)}"]`);
        if (field) field.value = value;
      }
    }
  }
}

function replaceList(html) {
  const budgetForms = budgetFormsState();
  const budgetFocus = document.activeElement?.closest?.(".budget-request[data-run-id]")
    ? { run: document.activeElement.closest(".budget-request").dataset.runId, name: document.activeElement.name }
    : null;
  const kept = new Map();
  for (const card of live.querySelectorAll(".approval[data-approval-id]")) kept.set(card.dataset.approvalId, cardState(card));
  const active = document.activeElement;
  const typingIn = active && live.contains(active) && active.matches("input[type=text], textarea") && cardOf(active)
    ? { id: cardOf(active).dataset.approvalId, name: active.name, start: active.selectionStart, end: active.selectionEnd }
    : null;
  const cardHadFocus = keys.hasFocus();
  live.innerHTML = html;
  restoreBudgetForms(budgetForms);
  if (budgetFocus) {
    live.querySelector(`.budget-request[data-run-id="${CSS.escape(budgetFocus.run)}"] [name="${CSS.escape(budgetFocus.name)}"]`)?.focus();
  }

  for (const card of live.querySelectorAll(".approval[data-approval-id]")) {
    const id = card.dataset.approvalId;
    if (kept.has(id)) restoreCard(card, kept.get(id));
    if (deciding.has(id)) markBusy(card, true);
    if (typingIn && typingIn.id === id) {
      const field = card.querySelector(`[name="${CSS.escape(typingIn.name)}"]`);
      if (field && !field.disabled) {
        field.focus();
        field.setSelectionRange(typingIn.start, typingIn.end);
      }
    }
  }
  keys.restore(cardHadFocus);
  bulk.updateCount();
  placeAnswers();
}

let inFlight = null;
let again = false;

// One fetch at a time; changes that arrive meanwhile cause exactly one more.
function refresh() {
  if (inFlight) {
    again = true;
    return inFlight;
  }
  inFlight = (async () => {
    do {
      again = false;
      const response = await fetch(live.dataset.partialUrl, { credentials: "same-origin", cache: "no-store" });
      if (response.redirected) {
        location.reload(); // signed out: show the login page
        return;
      }
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      replaceList(await response.text());
    } while (again);
  })()
    .catch((err) => showMessage(`Could not refresh the queue (${err.message}).`, "error"))
    .finally(() => {
      inFlight = null;
    });
  return inFlight;
}

// Approvals whose decision is being posted: their buttons stay disabled across refreshes.
const deciding = new Set();

function markBusy(card, busy) {
  card.classList.toggle("busy", busy);
  // A button this person may not use (data-refused, with its reason beside it) stays disabled.
  for (const button of card.querySelectorAll("button")) button.disabled = busy || "refused" in button.dataset;
}

function setDeciding(id, busy) {
  if (busy) deciding.add(id);
  else deciding.delete(id);
  const card = cardById(id);
  if (card) markBusy(card, busy);
}

// --- editing the arguments ------------------------------------------------------------------

// Only an opened edit box is sent: closed, its textarea is disabled and the call runs as asked.
function setEditOpen(details, open) {
  details.open = open;
  const area = details.querySelector("textarea.edit-arguments");
  if (area) area.disabled = !open;
}

live.addEventListener("toggle", (event) => {
  const details = event.target;
  if (details.matches && details.matches("details.edit-args")) setEditOpen(details, details.open);
}, true); // toggle does not bubble

function showEditError(card, text) {
  const box = card.querySelector(".edit-error");
  if (!box) return false;
  box.textContent = text;
  box.hidden = !text;
  return true;
}

// The browser's check of an opened edit; the server checks again and has the last word.
function editProblems(card) {
  const area = card.querySelector("textarea.edit-arguments");
  if (!area || area.disabled) return [];
  const schemaNode = card.querySelector("details.edit-args script[type='application/json']");
  const schema = schemaNode ? JSON.parse(schemaNode.textContent) : {};
  return argumentErrors(schema, area.value);
}

// Checked as the person types (a moment after the last key), naming the field that does not fit;
// the box is marked invalid until it fits. Approve checks again, and the server has the last word.
const typingTimers = new WeakMap();
live.addEventListener("input", (event) => {
  const area = event.target;
  if (!area.matches || !area.matches("textarea.edit-arguments")) return;
  clearTimeout(typingTimers.get(area));
  const id = cardOf(area)?.dataset.approvalId;
  typingTimers.set(area, setTimeout(() => {
    // By the approval's id: a refresh of the list may have replaced the card (keeping what was typed).
    const card = id && cardById(id);
    if (!card) return;
    const current = card.querySelector("textarea.edit-arguments") || area;
    const problems = editProblems(card);
    current.setAttribute("aria-invalid", problems.length ? "true" : "false");
    showEditError(card, problems.length ? `The edit does not fit the tool's schema: ${problems.join("; ")}` : "");
  }, 300));
});

// --- one decision ---------------------------------------------------------------------------

async function postForm(form, body) {
  const response = await fetch(form.action, {
    method: "POST",
    body,
    credentials: "same-origin",
    headers: { Accept: "application/json", "X-CSRFToken": csrfToken(form) },
  });
  let data = {};
  try {
    data = await response.json();
  } catch {
    data = {};
  }
  return { response, data };
}

live.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.approval-decide");
  if (!form) return;
  event.preventDefault();
  const card = cardOf(form);
  const id = card.dataset.approvalId;
  if (deciding.has(id)) return;
  const body = new FormData(form);
  // Pressing Enter in a text field submits with the first button, which is Reject.
  const button = event.submitter;
  if (button && button.name) body.set(button.name, button.value);
  // The twins' confirmation sits above the form (_card_twins.html): sent with it when ticked.
  if (!body.has("confirm_twins")) {
    for (const box of card.querySelectorAll("input.confirm-twins:checked")) body.append("confirm_twins", box.value);
  }
  const approving = String(body.get("decision") || "").startsWith("approve");
  if (approving) {
    const problems = editProblems(card);
    if (problems.length) {
      showEditError(card, `Not sent, the edit does not fit the tool's schema: ${problems.join("; ")}`);
      card.querySelector("textarea.edit-arguments")?.focus();
      return;
    }
  }
  showEditError(card, "");
  setDeciding(id, true);
  try {
    const { response, data } = await postForm(form, body);
    let answer = ["", "info"];
    if (response.status === 409) {
      answer = [data.error || "Someone else decided this approval first.", "error"];
    } else if (!response.ok) {
      const text = data.error || `The decision was not recorded (HTTP ${response.status}).`;
      // The server's refusal of an edit also goes next to the edit box (kept across the refresh).
      if (approving && body.has("arguments") && response.status === 400) showEditError(cardById(id) || card, text);
      answer = [text, "error"];
    } else if (data.approval && data.approval.status === "expired") {
      answer = [data.message, "warning"];
    } else if (data.message) {
      answer = [data.message, "success"];
    }
    // Said once, where the person acted (in the card, or where it was): the list at the top is
    // for answers that belong to no one card (bulk decisions, a refresh that failed).
    noteAnswer(id, ...answer);
  } catch {
    const text = "Network error: the decision may not have been recorded; check the list.";
    noteAnswer(id, text, "error");
  } finally {
    setDeciding(id, false);
    await refresh();
  }
});

// --- bulk decisions (approvals_bulk.js) -------------------------------------------------------

const bulk = installBulk({ live, form: document.getElementById("bulk-form"), showMessage, setDeciding, postForm, refresh });

subscribe((message) => {
  if (message.type === "socket.open") {
    if (liveStatus) {
      liveStatus.textContent = "Live updates: on.";
      liveStatus.classList.remove("offline");
    }
    refresh(); // changes made while the socket was down
  } else if (message.type === "socket.closed") {
    if (liveStatus) {
      liveStatus.textContent = "Live updates: reconnecting…";
      liveStatus.classList.add("offline");
    }
  } else if (message.type === "approvals.changed") {
    refresh();
  }
});

// --- compact view ---------------------------------------------------------------------------

// A person working through many calls hides what they do not need per card; the choice is kept
// in this browser.
const compactToggle = document.getElementById("compact-toggle");
if (compactToggle) {
  const setCompact = (on) => {
    live.classList.toggle("compact", on);
    compactToggle.setAttribute("aria-pressed", String(on));
    compactToggle.textContent = on ? "Full view" : "Compact view";
    try {
      localStorage.setItem("approvals.compact", on ? "1" : "0");
    } catch {
      // private windows may refuse storage: the view still changes
    }
  };
  let stored = null;
  try {
    stored = localStorage.getItem("approvals.compact");
  } catch {
    stored = null;
  }
  compactToggle.hidden = false;
  setCompact(stored === "1");
  compactToggle.addEventListener("click", () => setCompact(!live.classList.contains("compact")));
}

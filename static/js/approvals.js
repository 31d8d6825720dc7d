// The approval queue: the list is refetched whenever the socket says approvals changed, and
// decisions are posted with fetch, so nothing needs a page reload.
import { subscribe } from "./badge.js";

const live = document.getElementById("approval-live");
const flash = document.getElementById("approval-flash");
const liveStatus = document.getElementById("approval-live-status");

function showMessage(text, level = "info") {
  if (!flash || !text) return;
  const item = document.createElement("li");
  item.className = `msg-${level}`;
  item.textContent = text;
  flash.prepend(item);
  while (flash.children.length > 5) flash.lastElementChild.remove();
}

function csrfToken(form) {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  if (cookie) return decodeURIComponent(cookie.slice("csrftoken=".length));
  return form.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
}

function cardOf(element) {
  return element.closest(".approval[data-approval-id]");
}

// Replace the list, keeping what the operator was typing: a new approval arriving must not
// wipe a half-written rejection reason.
function replaceList(html) {
  const typed = new Map();
  for (const input of live.querySelectorAll(".approval input[name=reason]")) {
    if (input.value) typed.set(cardOf(input).dataset.approvalId, input.value);
  }
  const active = document.activeElement;
  const focused = active && live.contains(active) && active.name === "reason"
    ? { id: cardOf(active).dataset.approvalId, start: active.selectionStart, end: active.selectionEnd }
    : null;
  live.innerHTML = html;

  for (const card of live.querySelectorAll(".approval[data-approval-id]")) {
    const id = card.dataset.approvalId;
    const input = card.querySelector("input[name=reason]");
    if (input && typed.has(id)) input.value = typed.get(id);
    if (deciding.has(id)) markBusy(card, true);
    if (input && focused && focused.id === id) {
      input.focus();
      input.setSelectionRange(focused.start, focused.end);
    }
  }
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
  for (const button of card.querySelectorAll("button")) button.disabled = busy;
}

function setDeciding(id, busy) {
  if (busy) deciding.add(id);
  else deciding.delete(id);
  const card = live.querySelector(`.approval[data-approval-id="${CSS.escape(id)}"]`);
  if (card) markBusy(card, busy);
}

live.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.approval-decide");
  if (!form) return;
  event.preventDefault();
  const id = cardOf(form).dataset.approvalId;
  if (deciding.has(id)) return;
  const body = new FormData(form);
  // Pressing Enter in the reason field submits with the first button, which is Reject.
  const button = event.submitter;
  if (button && button.name) body.set(button.name, button.value);
  setDeciding(id, true);
  try {
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
    if (response.status === 409) {
      showMessage(data.error || "Someone else decided this approval first.", "error");
    } else if (!response.ok) {
      showMessage(data.error || `The decision was not recorded (HTTP ${response.status}).`, "error");
    } else if (data.approval && data.approval.status === "expired") {
      showMessage(data.message, "warning");
    }
  } catch {
    showMessage("Network error: the decision may not have been recorded; check the list.", "error");
  } finally {
    setDeciding(id, false);
    await refresh();
  }
});

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

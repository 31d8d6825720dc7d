// The run page's calls waiting for a person: the approval queue's own cards (evidence, state,
// twins and controls), decided here with fetch as in the queue, and fetched again whenever the
// approvals socket says approvals changed. The queue's keyboard keys are not installed here: on
// a run page, "a" must not approve anything.
import { subscribe } from "./badge.js";

const section = document.getElementById("run-waiting");
const cards = document.getElementById("run-waiting-cards");
const answers = document.getElementById("run-waiting-answers");

function csrfToken(form) {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  if (cookie) return decodeURIComponent(cookie.slice("csrftoken=".length));
  return form.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
}

function say(text, level) {
  if (!text) return;
  const item = document.createElement("p");
  item.className = `card-answer msg-${level}`;
  item.textContent = text;
  answers.prepend(item);
  while (answers.children.length > 3) answers.lastElementChild.remove();
  section.hidden = false;
}

// Without the script a decision comes back to this page too (the card's form goes to the call's own page).
function backHere() {
  for (const next of cards.querySelectorAll("form.approval-decide input[name=next]")) next.value = location.pathname;
}

// Only an opened edit box is sent: closed, its textarea is disabled and the call runs as asked.
cards.addEventListener("toggle", (event) => {
  const details = event.target;
  if (!details.matches || !details.matches("details.edit-args")) return;
  const area = details.querySelector("textarea.edit-arguments");
  if (area) area.disabled = !details.open;
}, true); // toggle does not bubble

// A person typing a reason or an edit keeps it: the refresh waits until they leave the card.
function busy() {
  const active = document.activeElement;
  return Boolean(active && cards.contains(active) && active.matches("input[type=text], textarea"));
}

// What a person opened on a card (a result the model read, the check's whole answer) stays open
// when the cards are fetched again.
function detailsKey(details) {
  const card = details.closest(".approval[data-approval-id]");
  if (!card) return null;
  if (details.matches(".state-answer")) return `${card.dataset.approvalId}:state`;
  const entry = details.closest(".read-entry");
  return entry ? `${card.dataset.approvalId}:read:${[...entry.parentElement.children].indexOf(entry)}` : null;
}

let inFlight = null;
let again = false;

async function refresh() {
  if (inFlight) {
    again = true;
    return;
  }
  inFlight = (async () => {
    do {
      again = false;
      if (busy()) {
        cards.addEventListener("focusout", () => setTimeout(refresh, 0), { once: true });
        return;
      }
      const response = await fetch(section.dataset.partialUrl, { credentials: "same-origin", cache: "no-store" });
      if (response.redirected) {
        location.reload(); // signed out: show the login page
        return;
      }
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const opened = new Set([...cards.querySelectorAll("details[open]:not(.edit-args)")].map(detailsKey));
      // Twins confirmed by name stay ticked while the card names the same ones (the value lists them).
      const confirmed = new Set([...cards.querySelectorAll("input.confirm-twins:checked")].map((box) => box.value));
      cards.innerHTML = await response.text();
      for (const details of cards.querySelectorAll("details:not(.edit-args)")) {
        if (opened.has(detailsKey(details))) details.open = true;
      }
      for (const box of cards.querySelectorAll("input.confirm-twins")) {
        if (confirmed.has(box.value)) box.checked = true;
      }
      backHere();
      section.hidden = !cards.querySelector(".approval[data-approval-id]") && !answers.children.length;
    } while (again);
  })()
    .catch((err) => say(`Could not refresh the waiting calls (${err.message}).`, "error"))
    .finally(() => {
      inFlight = null;
    });
}

cards.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.approval-decide");
  if (!form) return;
  event.preventDefault();
  const card = form.closest(".approval[data-approval-id]");
  if (card.classList.contains("busy")) return;
  const body = new FormData(form);
  if (event.submitter && event.submitter.name) body.set(event.submitter.name, event.submitter.value);
  card.classList.add("busy");
  for (const button of card.querySelectorAll("button")) button.disabled = true;
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
    if (response.ok) say(data.message, data.approval && data.approval.status === "expired" ? "warning" : "success");
    else say(data.error || `The decision was not recorded (HTTP ${response.status}).`, "error");
  } catch {
    say("Network error: the decision may not have been recorded; check the queue.", "error");
  } finally {
    document.activeElement?.blur?.();
    await refresh();
  }
});

if (section && cards) {
  backHere();
  subscribe((message) => {
    if (message.type === "approvals.changed" || message.type === "socket.open") refresh();
  });
}

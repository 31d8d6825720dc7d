// The header badge of pending approvals, and the one approvals socket a page shares.
//
// Loaded on every page (base.html) for people who may see approvals. Other modules of the
// page (approvals.js) import `subscribe` from here so the page keeps a single socket.
// Listeners receive the server's messages ({type: "approvals.changed", pending}, and
// {type: "approval.to_decide", ...} once notify.js asked for them with `send`) and two
// local ones: {type: "socket.open"} after every (re)connect, when changes may have been
// missed, and {type: "socket.closed"}.

const SOCKET_PATH = "/ws/approvals/";
const MAX_DELAY_MS = 30000;

const listeners = new Set();
let socket = null;
let attempts = 0;

export function subscribe(listener) {
  listeners.add(listener);
  if (socket && socket.readyState === WebSocket.OPEN) listener({ type: "socket.open" });
  return () => listeners.delete(listener);
}

// Sends `message` on the shared socket; false when it is not open (a listener of "socket.open"
// sends again after each reconnect).
export function send(message) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return false;
  socket.send(JSON.stringify(message));
  return true;
}

function emit(message) {
  for (const listener of listeners) {
    try {
      listener(message);
    } catch (err) {
      console.error(err);
    }
  }
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${scheme}://${location.host}${SOCKET_PATH}`);
  socket.addEventListener("open", () => {
    attempts = 0;
    emit({ type: "socket.open" });
  });
  socket.addEventListener("message", (event) => {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      return;
    }
    emit(message);
  });
  socket.addEventListener("close", () => {
    emit({ type: "socket.closed" });
    // Exponential backoff with jitter, so a restarted server is not hit by every tab at once.
    const delay = Math.min(MAX_DELAY_MS, 1000 * 2 ** attempts) * (0.5 + Math.random() / 2);
    attempts += 1;
    setTimeout(connect, delay);
  });
}

const badge = document.getElementById("approval-badge");
let latestRequest = 0;
// The oldest waiting call's age: seconds as the server counted them, and when we heard it.
// The page is written with it (the header has its width from the first paint), then kept current.
const rendered = document.getElementById("approval-oldest");
let oldest =
  badge && rendered && rendered.dataset.seconds
    ? { pending: Number(badge.textContent), seconds: Number(rendered.dataset.seconds), heardAt: performance.now() }
    : null;

// "45 s", "4 min", "2 h 5 min", "3 d 4 h": coarse on purpose, it is read at a glance.
export function ageText(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  const minutes = Math.floor(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

function ageLabel() {
  // Next to the count (whose text stays the number): "· oldest 4 min".
  let label = document.getElementById("approval-oldest");
  if (!label && badge) {
    label = document.createElement("span");
    label.id = "approval-oldest";
    label.className = "badge-age";
    badge.after(label);
  }
  return label;
}

function showAge() {
  const label = ageLabel();
  if (!label) return;
  if (!oldest) {
    label.textContent = "";
    label.hidden = true;
    badge.title = "Nothing waiting";
    return;
  }
  const age = ageText(oldest.seconds + (performance.now() - oldest.heardAt) / 1000);
  label.textContent = `· oldest ${age}`;
  label.hidden = false;
  badge.title = `${oldest.pending} waiting · oldest ${age}`;
}

async function updateBadge() {
  if (!badge || !badge.dataset.countUrl) return;
  const request = ++latestRequest;
  const response = await fetch(badge.dataset.countUrl, {
    headers: { Accept: "application/json" },
    credentials: "same-origin",
    cache: "no-store",
  });
  // A later request may have answered first: only the newest count is shown.
  if (request !== latestRequest || !response.ok || response.redirected) return;
  const { pending, expiring, budget_waiting: onBudget, oldest_waiting_seconds: seconds } = await response.json();
  if (request !== latestRequest || typeof pending !== "number") return;
  badge.textContent = String(pending);
  const warned = document.getElementById("approval-expiring");
  if (warned && typeof expiring === "number") {
    // Approvals warned that they expire soon: beside the count, only while there are some.
    warned.textContent = `${expiring} expiring`;
    warned.hidden = expiring === 0;
  }
  const budget = document.getElementById("approval-budget");
  if (budget && typeof onBudget === "number") {
    // Runs waiting on a spent budget: their requests head the queue.
    budget.textContent = `${onBudget} on budget`;
    budget.hidden = onBudget === 0;
  }
  badge.classList.toggle("badge-zero", pending === 0);
  oldest = pending > 0 && typeof seconds === "number" ? { pending, seconds, heardAt: performance.now() } : null;
  showAge();
}

// The age grows while nothing changes: count it on here, without asking the server.
setInterval(showAge, 15000);

subscribe((message) => {
  if (message.type === "socket.open" || message.type === "approvals.changed") {
    updateBadge().catch(() => {});
  }
});

connect();

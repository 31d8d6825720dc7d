// Small DOM helpers shared by the run page's modules (run_live.js, run_approvals.js).

// How many characters of an arguments hash a page shows (the full hash is in the title).
export const HASH_CHARS = 12;

export const shortHash = (hash) => (hash || "").slice(0, HASH_CHARS);

// An element with attributes and text; text always goes in through textContent.
export function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  if (text !== null && text !== undefined) node.textContent = String(text);
  return node;
}

// A moment in the reader's time zone, with the zone's name: "2026-11-30 19:52:36 UTC", or only
// "19:52:36 UTC" for `timeOnly` (the full date and the exact instant are then in the title).
export function when(iso, { timeOnly = false } = {}) {
  const at = new Date(iso);
  if (!iso || Number.isNaN(at.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
    .formatToParts(at).find((part) => part.type === "timeZoneName");
  const time = `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}${zone ? ` ${zone.value}` : ""}`;
  return timeOnly ? time : `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${time}`;
}

// A <time> element for `when`; null when there is no moment to show.
export function timeNode(iso, { timeOnly = false, className = null } = {}) {
  const text = when(iso, { timeOnly });
  if (!text) return null;
  return el("time", { datetime: iso, title: when(iso), class: className }, text);
}

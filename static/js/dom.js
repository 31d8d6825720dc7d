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

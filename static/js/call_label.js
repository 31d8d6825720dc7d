// One name for a call, as runs/lifecycle/call_labels.py writes it for the server's pages:
// `get_weather(city="Lagos") · step 2`, from the masked arguments the page shows.
const ARGUMENTS_CHARS = 60;
const VALUE_CHARS = 24;

const chars = (text) => Array.from(text);
const cut = (text, limit) => (chars(text).length <= limit ? text : `${chars(text).slice(0, limit - 1).join("")}…`);

function valueInShort(value) {
  if (Array.isArray(value)) return value.length ? "[…]" : "[]";
  if (value !== null && typeof value === "object") return Object.keys(value).length ? "{…}" : "{}";
  if (typeof value === "string") return JSON.stringify(cut(value, VALUE_CHARS));
  return cut(JSON.stringify(value), VALUE_CHARS);
}

export function argumentsInShort(argumentsText) {
  let value = argumentsText;
  if (typeof value === "string" || value === undefined || value === null) {
    try {
      value = JSON.parse(argumentsText || "{}");
    } catch {
      return "…";
    }
  }
  const text = value !== null && typeof value === "object" && !Array.isArray(value)
    ? Object.entries(value).map(([key, item]) => `${key}=${valueInShort(item)}`).join(", ")
    : valueInShort(value);
  return cut(text, ARGUMENTS_CHARS);
}

// {tool, arguments, step, text}; `argumentsText` undefined while the page has not read them yet.
export function callLabel({ tool, argumentsText, step }) {
  const short = argumentsText === undefined ? "(…)" : `(${argumentsInShort(argumentsText)})`;
  const where = step === undefined || step === null ? "" : `step ${step}`;
  return { tool, arguments: short, step: where, text: `${tool}${short}${where ? ` · ${where}` : ""}` };
}

// The rule editor's conditions as rows (path, operator, value) instead of a JSON list.
//
// The form posts the JSON textarea (#id_conditions) whatever happens here: the rows only write
// it on every change, and the server checks it (rule_errors) and answers in words. Without
// JavaScript, or when the textarea holds something the rows cannot show, the textarea stays.
// A value is read as JSON (50, "ORD-1", ["a", "b"], true); text that is not JSON is taken as
// text, so ORD-1 and $run.customer can be typed without quotes.

const NO_VALUE = new Set(["present", "absent", "outside"]);

const textarea = document.getElementById("id_conditions");
const operators = JSON.parse(textarea.dataset.operators);

function readValue(text) {
  const trimmed = text.trim();
  if (trimmed === "") return "";
  try {
    return JSON.parse(trimmed);
  } catch {
    return trimmed;
  }
}

// "is one of" takes a list the way people type it: ORD-1001, ORD-1003 (or a JSON list).
function readList(text) {
  const value = readValue(text);
  if (Array.isArray(value) || text.trim() === "") return value;
  return text.split(",").map((part) => readValue(part)).filter((part) => part !== "");
}

function showValue(value) {
  if (value === undefined) return "";
  if (typeof value === "string") {
    try {
      JSON.parse(value); // "50" or "true" as text: show the quotes, or it would read back as a number
      return JSON.stringify(value);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value);
}

function parseConditions() {
  const text = textarea.value.trim();
  if (text === "") return [];
  let conditions;
  try {
    conditions = JSON.parse(text);
  } catch {
    return null;
  }
  const usable = Array.isArray(conditions) && conditions.every(
    (c) => c && typeof c === "object" && !Array.isArray(c) && typeof c.path === "string" && c.op in operators
      && Object.keys(c).every((key) => ["path", "op", "value"].includes(key)),
  );
  return usable ? conditions : null;
}

function element(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

const rows = element("tbody");

function write() {
  const conditions = [...rows.children].map((row) => {
    const op = row.querySelector(".condition-op").value;
    const condition = { path: row.querySelector(".condition-path").value.trim(), op };
    const text = row.querySelector(".condition-value").value;
    if (op === "in") condition.value = readList(text);
    else if (!NO_VALUE.has(op)) condition.value = readValue(text);
    return condition;
  });
  textarea.value = conditions.length ? JSON.stringify(conditions) : "";
}

function addRow(condition = { path: "$.", op: "eq" }) {
  const row = element("tr", { class: "condition-row" });
  const path = element("input", { type: "text", class: "condition-path mono", "aria-label": "JSON path", placeholder: "$.amount" });
  path.value = condition.path;
  const op = element("select", { class: "condition-op", "aria-label": "operator" });
  for (const [name, words] of Object.entries(operators)) op.append(element("option", { value: name }, words));
  op.value = condition.op;
  const value = element("input", { type: "text", class: "condition-value mono", "aria-label": "value", placeholder: '50, "ORD-1", ["a", "b"] or $run.customer' });
  value.value = showValue(condition.value);
  const remove = element("button", { type: "button", class: "condition-remove" }, "Remove");
  const sync = () => {
    value.disabled = NO_VALUE.has(op.value);
    write();
  };
  path.addEventListener("input", write);
  value.addEventListener("input", write);
  op.addEventListener("change", sync);
  remove.addEventListener("click", () => {
    row.remove();
    write();
  });
  for (const part of [path, op, value, remove]) {
    const cell = element("td");
    cell.append(part);
    row.append(cell);
  }
  rows.append(row);
  value.disabled = NO_VALUE.has(op.value);
}

const conditions = parseConditions();
if (conditions !== null) {
  const table = element("table", { id: "condition-rows" });
  const headings = element("tr");
  for (const heading of ["Path", "Operator", "Value"]) headings.append(element("th", {}, heading));
  // The remove buttons' column: named for screen readers, no visible heading needed.
  const removeHeading = element("th");
  removeHeading.append(element("span", { class: "visually-hidden" }, "Remove"));
  headings.append(removeHeading);
  table.append(element("thead"), rows);
  table.tHead.append(headings);
  const add = element("button", { type: "button", id: "condition-add" }, "Add a condition");
  add.addEventListener("click", () => {
    addRow();
    write();
    rows.lastChild.querySelector(".condition-path").focus();
  });
  const asJson = element("button", { type: "button", id: "condition-json" }, "Edit as JSON");
  asJson.addEventListener("click", () => {
    textarea.style.display = "";
    editor.remove();
  });
  const editor = element("div", { id: "condition-editor" });
  editor.append(table, add, " ", asJson);
  conditions.forEach((condition) => addRow(condition));
  textarea.style.display = "none"; // not `hidden`: the stylesheet sets textareas' display
  (textarea.closest("label") || textarea).after(editor);
}

// The group and the reason only mean something with some actions: shown with those only.
const action = document.getElementById("id_action");
const RELEVANT = {
  "field-group": ["ask_group"],
  "field-reason": ["reject"],
  "field-approvals_needed": ["ask_quorum"],
  "field-quorum_groups": ["ask_quorum"],
};

function showRelevant() {
  for (const [id, actions] of Object.entries(RELEVANT)) {
    const field = document.getElementById(id);
    const errors = field && field.querySelector(".errorlist");
    if (field) field.hidden = !actions.includes(action.value) && !errors;
  }
}
if (action) {
  action.addEventListener("change", showRelevant);
  showRelevant();
}

// The confirmation names the calls people rejected that the rule, as previewed, would have
// approved. Once the rule is changed it may no longer be those calls (the server asks again when
// they differ), so the box is cleared and the page says why.
const confirmBox = document.getElementById("rule-confirm-saved-over");
if (confirmBox) {
  const stale = document.getElementById("rule-confirm-stale");
  const changed = (event) => {
    if (event.target === confirmBox || !confirmBox.checked) return;
    confirmBox.checked = false;
    stale.hidden = false;
  };
  const ruleForm = document.getElementById("rule-form");
  ruleForm.addEventListener("input", changed);
  ruleForm.addEventListener("change", changed);
}

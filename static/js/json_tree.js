// JSON as a tree people can read: objects and arrays fold and unfold, each value says its type,
// long strings fold (with "show all"), a search finds keys and values at any depth (unfolding
// what hides them and marking them), and Copy puts the JSON on the clipboard.
//
// Used by the run page's live script (arguments, results, the model's JSON answers), and by pages
// the server renders: there a <pre data-json-tree="what it is"> holds the JSON as readable text
// (what a browser without JavaScript shows) and upgradeAll() turns it into a tree. The tree only
// shows what it is given: the server has masked sensitive fields already ("••••", marked here).
// All text goes in through textContent.
import { el } from "./dom.js";

export const MASK = "••••"; // toolsapp/sensitive.py's MASK
const STRING_FOLD = 160; // characters of a string shown before "show all"
const ARRAY_PAGE = 100; // items of an array rendered at once ("show N more" for the rest)
const OPEN_DEPTH = 2; // containers this deep or shallower start unfolded
const EXPAND_ALL_LIMIT = 2000; // "Expand all" stops unfolding after this many containers
// A smaller tree (a few values, at most one level of nesting) has no search box nor "Expand all":
// it fits the eye.
const SEARCH_AFTER_LEAVES = 6;
let treeCount = 0;

// The tree's stylesheet, for a page whose template does not link it (it is looked for by name, so
// a page that links it gets nothing twice); added with the first tree, so a page without one
// loads nothing more.
let stylesChecked = false;
function ensureStyles() {
  if (stylesChecked) return;
  stylesChecked = true;
  if (document.querySelector('link[rel="stylesheet"][href*="json_tree"]')) return;
  const href = new URL("../css/json_tree.css", import.meta.url).href;
  document.head.append(el("link", { rel: "stylesheet", href }));
}

const kindOf = (value) => (value === null ? "null" : Array.isArray(value) ? "array" : typeof value);
const isContainer = (value) => value !== null && typeof value === "object";
const plural = (n, one, many) => `${n.toLocaleString()} ${n === 1 ? one : many}`;

function summaryText(value) {
  if (Array.isArray(value)) return value.length ? `[${plural(value.length, "item", "items")}]` : "[] empty array";
  const n = Object.keys(value).length;
  return n ? `{${plural(n, "key", "keys")}}` : "{} empty object";
}

function keyText(key, inArray) {
  return inArray ? String(key) : JSON.stringify(String(key));
}

function typeLabel(value) {
  if (value === MASK) return "masked";
  return kindOf(value);
}

// The JSON a value is, for the clipboard.
export const jsonText = (value) => JSON.stringify(value, null, 2);

// "12 characters" etc.; how many characters a string has as people count them.
const charCount = (text) => Array.from(text).length;

// The value as JSON when `text` is JSON, else undefined (a cut or a plain text stays text).
export function parsedJson(text) {
  if (typeof text !== "string") return undefined;
  const trimmed = text.trim();
  if (!trimmed || !"{[".includes(trimmed[0])) return undefined;
  try {
    return JSON.parse(trimmed);
  } catch {
    return undefined;
  }
}

class TreeNode {
  constructor(tree, { key, value, depth, parent, inArray }) {
    Object.assign(this, { tree, key, value, depth, parent, inArray });
    this.children = null; // key -> TreeNode, once rendered
    this.shown = 0; // array items rendered so far
    this.li = null;
  }

  get label() {
    return this.parent ? keyText(this.key, this.inArray) : this.tree.name;
  }

  // The <li> of this value: a leaf line, or a toggle with its children.
  render() {
    const container = isContainer(this.value) && Object.keys(this.value).length > 0;
    this.li = el("li", { class: container ? "jt-node" : "jt-leaf", dataset: { kind: kindOf(this.value) } });
    if (!container) {
      this.li.append(...this.keyParts(), this.valueNode(), el("span", { class: "jt-type" }, typeLabel(this.value)));
      if (this.value === MASK) {
        this.li.classList.add("jt-masked-leaf");
        this.li.lastChild.title = "A sensitive field: its value is hidden on every page";
      }
      return this.li;
    }
    this.toggle = el("button", { type: "button", class: "jt-toggle", "aria-expanded": "false" });
    this.toggle.append(el("span", { class: "jt-caret", "aria-hidden": "true" }), ...this.keyParts(),
      el("span", { class: "jt-summary" }, summaryText(this.value)));
    this.toggle.addEventListener("click", () => this.setOpen(!this.open));
    const copy = el("button", {
      type: "button", class: "jt-copy-node", "aria-label": `Copy ${this.label} as JSON`, title: `Copy ${this.label} as JSON`,
    }, "copy");
    copy.addEventListener("click", () => this.tree.copy(this.value, copy));
    this.list = el("ul", { class: "jt-children", hidden: true });
    this.li.append(this.toggle, copy, this.list);
    if (this.depth <= OPEN_DEPTH) this.setOpen(true);
    return this.li;
  }

  keyParts() {
    if (!this.parent) return [];
    const key = el("span", { class: this.inArray ? "jt-key jt-index" : "jt-key" }, keyText(this.key, this.inArray));
    return [key, el("span", { class: "jt-punct" }, ": ")];
  }

  valueNode() {
    const value = this.value;
    const kind = kindOf(value);
    if (isContainer(value)) return el("span", { class: "jt-value jt-empty" }, Array.isArray(value) ? "[]" : "{}");
    if (kind !== "string") return el("span", { class: `jt-value jt-${kind}` }, JSON.stringify(value));
    const span = el("span", { class: value === MASK ? "jt-value jt-string jt-masked" : "jt-value jt-string" });
    this.text = el("span", { class: "jt-text" });
    this.folded = charCount(value) > STRING_FOLD;
    span.append('"', this.text, '"');
    this.showText();
    if (this.folded) {
      this.more = el("button", { type: "button", class: "jt-show-all", "aria-expanded": "false" });
      this.more.addEventListener("click", () => this.unfold(this.more.getAttribute("aria-expanded") !== "true"));
      const wrap = el("span", { class: "jt-string-wrap" });
      wrap.append(span, " ", this.more);
      this.unfold(false);
      return wrap;
    }
    return span;
  }

  showText() {
    const whole = this.value;
    const open = !this.folded || (this.more && this.more.getAttribute("aria-expanded") === "true");
    this.text.textContent = open ? whole : `${Array.from(whole).slice(0, STRING_FOLD).join("")}…`;
  }

  unfold(open) {
    if (!this.more) return;
    this.more.setAttribute("aria-expanded", String(open));
    const count = charCount(this.value).toLocaleString();
    this.more.textContent = open ? "show less" : `show all ${count} characters`;
    this.more.setAttribute("aria-label", open ? `Show less of ${this.label}` : `Show all ${count} characters of ${this.label}`);
    this.showText();
  }

  get open() {
    return this.toggle ? this.toggle.getAttribute("aria-expanded") === "true" : true;
  }

  setOpen(open) {
    if (!this.toggle) return;
    if (open) this.renderChildren();
    this.toggle.setAttribute("aria-expanded", String(open));
    this.list.hidden = !open;
  }

  entries() {
    return Array.isArray(this.value) ? this.value.map((v, i) => [i, v]) : Object.entries(this.value);
  }

  // Children are rendered when first unfolded: a large result costs nothing until read.
  renderChildren(upTo = ARRAY_PAGE) {
    if (!this.children) this.children = new Map();
    const entries = this.entries();
    const limit = Array.isArray(this.value) ? Math.min(entries.length, Math.max(upTo, this.shown)) : entries.length;
    if (this.shown >= limit) return;
    this.list.querySelector(":scope > .jt-more-items")?.remove();
    for (const [key, value] of entries.slice(this.shown, limit)) {
      const child = new TreeNode(this.tree, {
        key, value, depth: this.depth + 1, parent: this, inArray: Array.isArray(this.value),
      });
      this.children.set(String(key), child);
      this.list.append(child.render());
    }
    this.shown = limit;
    if (limit < entries.length) {
      const rest = entries.length - limit;
      const item = el("li", { class: "jt-more-items" });
      const button = el("button", { type: "button" }, `Show ${plural(Math.min(rest, ARRAY_PAGE), "more item", "more items")} of ${rest.toLocaleString()}`);
      button.addEventListener("click", () => this.renderChildren(this.shown + ARRAY_PAGE));
      item.append(button);
      this.list.append(item);
    }
  }

  child(key) {
    if (!isContainer(this.value)) return null;
    if (this.toggle) this.setOpen(true);
    else this.renderChildren();
    if (!this.children.has(String(key)) && Array.isArray(this.value)) this.renderChildren(Number(key) + 1);
    return this.children.get(String(key)) || null;
  }
}

class Tree {
  constructor(value, { name, className }) {
    ensureStyles();
    this.value = value;
    this.name = name;
    this.id = `jt-${++treeCount}`;
    this.root = el("div", { class: `jt ${className || ""}`.trim(), dataset: { jsonTree: "ready" } });
    this.matches = [];
    this.current = -1;
    const stats = countOf(value);
    const bar = el("div", { class: "jt-bar" });
    this.status = el("span", { class: "jt-status muted", role: "status" });
    if (stats.leaves > SEARCH_AFTER_LEAVES || stats.containers > 2) {
      const label = el("label", { class: "jt-search-label", for: `${this.id}-search` });
      label.append(el("span", { class: "visually-hidden" }, `Search ${name}`));
      this.search = el("input", {
        type: "search", id: `${this.id}-search`, class: "jt-search", placeholder: "Search keys and values",
        autocomplete: "off", spellcheck: "false",
      });
      let timer = null;
      this.search.addEventListener("input", () => {
        clearTimeout(timer);
        timer = setTimeout(() => this.find(this.search.value), 120);
      });
      this.search.addEventListener("keydown", (event) => {
        if (event.key === "Enter") {
          event.preventDefault();
          this.find(this.search.value, true);
          this.step(event.shiftKey ? -1 : 1);
        } else if (event.key === "Escape" && this.search.value) {
          event.preventDefault();
          this.search.value = "";
          this.find("");
        }
      });
      label.append(this.search);
      bar.append(label);
    }
    if (stats.containers > 2) {
      const expand = el("button", { type: "button", class: "jt-expand-all", "aria-label": `Expand all of ${name}` }, "Expand all");
      const collapse = el("button", { type: "button", class: "jt-collapse-all", "aria-label": `Collapse all of ${name}` }, "Collapse all");
      expand.addEventListener("click", () => this.expandAll());
      collapse.addEventListener("click", () => this.collapseAll());
      bar.append(expand, collapse);
    }
    const copy = el("button", { type: "button", class: "jt-copy", "aria-label": `Copy ${name} as JSON`, title: `Copy ${name} as JSON` }, "Copy");
    copy.addEventListener("click", () => this.copy(value, copy));
    bar.append(copy, this.status);
    if (!this.search && stats.containers <= 2) bar.classList.add("jt-bar-compact");
    this.top = new TreeNode(this, { key: null, value, depth: 0, parent: null, inArray: false });
    const list = el("ul", { class: "jt-tree" });
    if (isContainer(value) && Object.keys(value).length) {
      this.top.list = list;
      this.top.renderChildren();
    } else {
      list.append(this.top.render());
    }
    this.root.append(bar, list);
  }

  async copy(value, button) {
    const text = jsonText(value);
    let done = false;
    try {
      await navigator.clipboard.writeText(text);
      done = true;
    } catch {
      // No clipboard API here (an insecure page, a refused permission): the old way.
      const area = el("textarea", { class: "visually-hidden", "aria-hidden": "true", tabindex: "-1" });
      area.value = text;
      document.body.append(area);
      area.select();
      try {
        done = document.execCommand("copy");
      } catch {
        done = false;
      }
      area.remove();
    }
    this.status.textContent = done ? "Copied." : "Could not copy: select the text instead.";
    button.dataset.copied = String(done);
  }

  containers() {
    const all = [];
    const walk = (node) => {
      if (!node.children) return;
      for (const child of node.children.values()) {
        if (child.toggle) all.push(child);
        walk(child);
      }
    };
    walk(this.top);
    return all;
  }

  expandAll() {
    let opened = 0;
    const open = (node) => {
      for (const child of node.children ? [...node.children.values()] : []) {
        if (!child.toggle || opened >= EXPAND_ALL_LIMIT) continue;
        child.setOpen(true);
        opened += 1;
        open(child);
      }
    };
    open(this.top);
    this.status.textContent = opened >= EXPAND_ALL_LIMIT ? `Expanded the first ${EXPAND_ALL_LIMIT} parts.` : "";
  }

  collapseAll() {
    for (const node of this.containers()) node.setOpen(false);
  }

  // Every match of `query` (case-insensitive) in keys and scalar values, each path unfolded and marked.
  find(query, keep = false) {
    const needle = query.trim().toLowerCase();
    if (keep && needle === this.lastQuery) return;
    this.lastQuery = needle;
    for (const mark of this.root.querySelectorAll(".jt-tree mark")) mark.replaceWith(mark.textContent);
    for (const line of this.root.querySelectorAll(".jt-current")) line.classList.remove("jt-current");
    this.root.querySelector(".jt-tree").normalize();
    this.matches = [];
    this.current = -1;
    if (!needle) {
      this.status.textContent = "";
      return;
    }
    const paths = [];
    const walk = (value, path, inArray) => {
      if (path.length && !inArray && String(path[path.length - 1]).toLowerCase().includes(needle)) paths.push(path);
      else if (!isContainer(value) && String(value).toLowerCase().includes(needle)) paths.push(path);
      if (isContainer(value)) for (const [key, child] of Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value)) walk(child, [...path, key], Array.isArray(value));
    };
    walk(this.value, [], false);
    for (const path of paths.slice(0, 500)) {
      let node = this.top;
      for (const key of path) node = node && node.child(key);
      if (!node || !node.li) continue;
      if (node.folded && !node.text.textContent.toLowerCase().includes(needle)) node.unfold(true);
      const spots = [...node.li.querySelectorAll(":scope > .jt-key, :scope > .jt-toggle > .jt-key, :scope > .jt-value .jt-text, :scope > .jt-value:not(.jt-string), :scope > .jt-string-wrap .jt-text")];
      for (const spot of spots) markIn(spot, needle);
      this.matches.push(node.li);
    }
    const n = paths.length;
    this.status.textContent = n ? `${plural(n, "match", "matches")}${n > 500 ? " (the first 500 marked)" : ""}` : "No match.";
  }

  step(direction) {
    if (!this.matches.length) return;
    this.matches[this.current]?.classList.remove("jt-current");
    this.current = (this.current + direction + this.matches.length) % this.matches.length;
    const line = this.matches[this.current];
    line.classList.add("jt-current");
    line.scrollIntoView({ block: "nearest" });
    this.status.textContent = `Match ${this.current + 1} of ${this.matches.length}`;
  }
}

function markIn(node, needle) {
  const text = node.textContent;
  const lower = text.toLowerCase();
  if (!lower.includes(needle)) return;
  const parts = [];
  let at = 0;
  for (let found = lower.indexOf(needle); found !== -1; found = lower.indexOf(needle, at)) {
    if (found > at) parts.push(text.slice(at, found));
    parts.push(el("mark", {}, text.slice(found, found + needle.length)));
    at = found + needle.length;
  }
  if (at < text.length) parts.push(text.slice(at));
  node.replaceChildren(...parts);
}

function countOf(value) {
  let leaves = 0;
  let containers = 0;
  const walk = (v) => {
    if (leaves + containers > 10000) return;
    if (isContainer(v) && Object.keys(v).length) {
      containers += 1;
      for (const child of Object.values(v)) walk(child);
    } else {
      leaves += 1;
    }
  };
  walk(value);
  return { leaves, containers };
}

// A tree of `value`. `name` says what it is ("the arguments of get_weather"): buttons and the
// search box are named after it. `className` goes on the tree's root.
export function jsonTree(value, { name = "the value", className = "" } = {}) {
  return new Tree(value, { name, className }).root;
}

// The tree of `text` when it is JSON; else a <pre> of the text as it is (with `className`).
export function jsonOrText(text, { name, className = "", pre = "mono" } = {}) {
  const value = parsedJson(text);
  if (value !== undefined) return jsonTree(value, { name, className });
  return el("pre", { class: `${className} ${pre}`.trim() }, text);
}

// Server-rendered <pre data-json-tree="name"> elements under `root`, each replaced by its tree
// (the pre's classes kept); one whose text is not JSON stays as it is.
export function upgradeAll(root = document) {
  for (const pre of root.querySelectorAll("pre[data-json-tree]")) {
    const value = parsedJson(pre.textContent);
    if (value === undefined) continue;
    const classes = [...pre.classList].filter((name) => name !== "mono").join(" ");
    pre.replaceWith(jsonTree(value, { name: pre.dataset.jsonTree || "the value", className: classes }));
  }
}

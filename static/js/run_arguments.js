// The arguments of the run's calls, as the server shows them (sensitive fields masked, read from
// the rows at each request), and what an edit-then-approve changed, field by field.
// Always through textContent.

import { el, shortHash } from "./dom.js";
import { jsonOrText } from "./json_tree.js";

// Loads /runs/<id>/arguments/?after=<pk> in pages, one load at a time; `onCall(shown)` for each.
// `after`: the last call the page already has (the server rendered them with the page).
export function argumentsLoader(url, onCall, after = 0) {
  let loading = null;
  let again = false;

  async function fetchFrom(start) {
    let from = start;
    for (;;) {
      const response = await fetch(`${url}?after=${encodeURIComponent(from)}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      const body = await response.json();
      for (const call of body.calls) {
        from = Math.max(from, call.pk);
        onCall(call);
      }
      if (!body.more || !body.calls.length) return from;
    }
  }

  async function load() {
    if (loading) {
      again = true;
      return loading;
    }
    loading = (async () => {
      try {
        do {
          again = false;
          after = Math.max(after, await fetchFrom(after));
        } while (again);
      } catch (error) {
        console.warn("arguments:", error.message);
      } finally {
        loading = null;
      }
    })();
    return loading;
  }

  // The calls from `pk` on again (an edit was approved after they were first read).
  async function reload(pk) {
    try {
      await fetchFrom(Math.max(0, pk - 1));
    } catch (error) {
      console.warn("arguments:", error.message);
    }
  }

  return { load, reload };
}

// The arguments as a tree (text when they are not JSON: cut, or hidden as unreadable), the hash
// beside them for comparing with logs. A block already on the page keeps its tree (what the
// person unfolded or searched) while the arguments have not changed.
const blockText = new WeakMap(); // block -> the arguments it shows

export function argumentsBlock(shown, existing = null) {
  if (existing && blockText.get(existing) === shown.arguments) return existing;
  const block = el("details", { class: "call-args", open: true });
  blockText.set(block, shown.arguments);
  const summary = el("summary", {}, "Arguments");
  summary.append(" ", el("code", { class: "call-args-hash muted", title: `arguments hash ${shown.args_hash}` }, shortHash(shown.args_hash)));
  block.append(summary, jsonOrText(shown.arguments, { name: `the arguments of ${shown.tool}`, className: "call-args-json" }));
  return block;
}

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString(undefined, { timeZoneName: "short" });
}

export function editBlock(shown) {
  const edit = shown.edit;
  if (!edit) return null;
  const block = el("div", { class: "call-edit" });
  const head = [`Edited by ${edit.by || "an operator"}`, when(edit.at)].filter(Boolean).join(" · ");
  block.append(el("p", { class: "call-edit-head" }, head));
  if (edit.note) block.append(el("p", { class: "call-edit-note muted" }, `Note: ${edit.note}`));
  if (edit.changes.length) {
    const table = el("table", { class: "call-edit-changes" });
    const headRow = el("tr");
    for (const name of ["Field", "The model asked", "Ran with"]) headRow.append(el("th", { scope: "col" }, name));
    table.append(el("thead"), el("tbody"));
    table.tHead.append(headRow);
    for (const change of edit.changes) {
      const row = el("tr", { dataset: { field: change.field } });
      row.append(
        el("td", { class: "mono" }, change.field),
        el("td", { class: "mono edit-asked" }, change.asked || "(not there)"),
        el("td", { class: "mono edit-ran" }, change.ran || "(removed)"),
      );
      table.tBodies[0].append(row);
    }
    block.append(table);
  }
  const ran = el("details", { class: "call-edit-ran" });
  ran.append(el("summary", {}, "Arguments that ran"), jsonOrText(edit.ran_with, { name: `the arguments that ran of ${shown.tool}` }));
  block.append(ran);
  return block;
}

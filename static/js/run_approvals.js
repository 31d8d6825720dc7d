// What the run page says about a call's approval, and the run's grants; built from the run's
// events (approval_brief and "grant" events), always through textContent.

import { el, shortHash } from "./dom.js";

// Who or what decided: "alice", "rule 'refunds under 50' v3", "a grant for this run"; null when
// the run's policy did (that text has its own wording). A rule that only sent the call to a
// person is not its decider: the person is.
function decider(approval) {
  const who = approval.decided_by;
  if (who) return approval.automatic && who === "the run's policy" ? null : who;
  if (approval.automatic && approval.rule_name) return `rule '${approval.rule_name}' v${approval.rule_version}`;
  return null;
}

function votes(approval) {
  const required = approval.required_approvals || 1;
  return required > 1 ? `${approval.approvals_given || 0} of ${required} approvals` : "";
}

// `call` is the call's data (its args_hash is the model's arguments); `approvalUrl(id)` links
// to the approval's own page.
export function approvalNode(approval, { call, approvalUrl }) {
  if (!approval) return null;
  const status = approval.status;
  const node = el("div", { class: "call-approval" });
  const by = decider(approval);
  const count = votes(approval);
  if (status === "pending") {
    const rule = approval.rule_name ? `sent by rule '${approval.rule_name}' v${approval.rule_version}` : "";
    const waiting = ["Waiting for approval", count, rule].filter(Boolean);
    node.append(`${waiting.join(" — ")} — `, el("a", { href: approvalUrl(approval.id) }, "open the approval queue"));
  } else if (status === "approved") {
    if (by) node.textContent = `Approved by ${by}${count ? ` (${count})` : ""}`;
    else node.textContent = `Approved automatically (${approval.reason || "policy"})`;
  } else if (status === "rejected") {
    const reason = approval.reason || (approval.automatic ? "policy" : "no reason given");
    if (by) node.textContent = `Rejected by ${by}: ${reason}`;
    else node.textContent = `Rejected automatically: ${reason}`;
  } else if (status === "expired") {
    node.textContent = `Approval expired${approval.reason ? `: ${approval.reason}` : ""}`;
  } else if (status === "closed") {
    node.textContent = `Closed: the run ended${approval.reason ? ` (${approval.reason})` : ""}`;
  } else {
    node.textContent = `Approval ${status}`;
  }
  node.classList.add(`approval-${status}`);
  node.dataset.approvalStatus = status;
  if (approval.guidance) node.append(el("div", { class: "call-guidance muted" }, `Guidance for the model: ${approval.guidance}`));
  if (approval.edited || approval.edited_args_hash) {
    const ran = approval.edited_args_hash || call.executed_args_hash || "";
    const line = el("div", { class: "call-edited", dataset: { modelHash: call.args_hash || "", ranHash: ran } });
    // Pending: an edit is proposed, and it needs every approval again before it runs.
    const proposed = status === "pending";
    line.append(
      proposed ? "Edited arguments proposed (they need every approval again): the model's " : "Arguments edited before approval: the model's ",
      el("code", { class: "model-hash", title: call.args_hash }, shortHash(call.args_hash)),
      proposed ? ", proposed " : ", ran with ",
      el("code", { class: "ran-hash", title: ran }, shortHash(ran)),
    );
    node.append(line);
  }
  return node;
}

// --- the run's grants ------------------------------------------------------------------------

function scopeText(grant) {
  return grant.args_hash ? `identical ${grant.tool} calls (args ${shortHash(grant.args_hash)})` : `every ${grant.tool} call`;
}

function csrfToken() {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
  return cookie ? decodeURIComponent(cookie.slice("csrftoken=".length)) : "";
}

function revokeForm(table, grantId) {
  const form = el("form", { method: "post", action: table.dataset.revokeUrl.replace(/\/0\/revoke\/$/, `/${grantId}/revoke/`), class: "inline revoke-form" });
  form.append(el("input", { type: "hidden", name: "csrfmiddlewaretoken", value: csrfToken() }),
    el("button", { type: "submit", class: "danger revoke-button" }, "Revoke"));
  return form;
}

function markRevoked(row, by) {
  row.dataset.active = "false";
  const state = row.querySelector(".grant-state");
  state.textContent = by ? `revoked by ${by}` : "revoked";
  state.className = "grant-state muted";
  row.querySelector(".revoke-form")?.remove();
}

// A "grant" event: {grant_id, tool, args_hash, by, revoked, revoked_by}. Replayed events arrive in order
// from the first; a revoked grant stays revoked (an older event never makes it active again).
export function renderGrant(data) {
  const table = document.getElementById("run-grants");
  if (!table) return;
  let row = table.querySelector(`tr[data-grant-id="${CSS.escape(String(data.grant_id))}"]`);
  if (!row) {
    row = el("tr", { class: "grant", dataset: { grantId: data.grant_id, active: "true" } });
    const state = el("td", { class: "grant-state ok" }, "active");
    const actions = el("td", { class: "grant-actions" });
    if (table.dataset.canRevoke === "true") actions.append(revokeForm(table, data.grant_id));
    row.append(el("td", { class: "grant-scope" }, scopeText(data)), el("td", { class: "grant-by" }, data.by),
      el("td", { class: "grant-when muted" }, "just now"), state, actions);
    table.querySelector("tbody").append(row);
    document.getElementById("run-grants-section").hidden = false;
  }
  if (data.revoked && row.dataset.active !== "false") markRevoked(row, data.revoked_by);
}

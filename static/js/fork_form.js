// The fork form: choosing what to change puts the text being replaced in the box, to edit rather
// than retype (the recorded tool result, or the model's answer). A box the person already typed
// in is left alone. Works without this script too: the box is then empty.
const form = document.getElementById("fork-form");
const box = document.getElementById("id_content");
const callSelect = document.getElementById("id_call_id");
let typed = box.value !== "";

box.addEventListener("input", () => {
  typed = box.value !== "";
});

function original(kind) {
  if (kind === "tool_result" && callSelect) return callSelect.selectedOptions[0]?.dataset.result || "";
  if (kind === "answer") return form.dataset.answer || "";
  return "";
}

function fill() {
  if (typed) return;
  const kind = form.querySelector("input[name=edit]:checked")?.value || "";
  box.value = original(kind);
}

form.addEventListener("change", (event) => {
  if (event.target.name === "edit" || event.target === callSelect) fill();
});

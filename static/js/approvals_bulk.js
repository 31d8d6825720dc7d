// The queue's bulk decisions: the cards' checkboxes belong to the bulk form (outside the list that
// refreshes); the selection is posted with fetch. A bulk approval holding twins (calls on the same
// thing) decides nothing: the server's confirmation, naming each group of twins (_bulk_twins.html),
// goes below the bulk form and is sent the same way once the person ticked each group.

export function installBulk({ live, form, showMessage, setDeciding, postForm, refresh }) {
  const selectAll = document.getElementById("select-all");
  const bulkCount = document.getElementById("bulk-count");

  function selectedBoxes() {
    return [...live.querySelectorAll("input.select-approval:checked")];
  }

  function updateCount() {
    if (!bulkCount) return;
    const boxes = live.querySelectorAll("input.select-approval");
    const n = selectedBoxes().length;
    bulkCount.textContent = n ? `${n} selected` : "none selected";
    if (selectAll) {
      selectAll.checked = boxes.length > 0 && n === boxes.length;
      selectAll.indeterminate = n > 0 && n < boxes.length;
    }
  }

  live.addEventListener("change", (event) => {
    if (event.target.matches("input.select-approval")) updateCount();
  });

  selectAll?.addEventListener("change", () => {
    for (const box of live.querySelectorAll("input.select-approval")) box.checked = selectAll.checked;
    updateCount();
  });

  function showTwinsConfirmation(html) {
    document.getElementById("bulk-twins")?.remove();
    const holder = document.createElement("div");
    holder.innerHTML = html;
    const box = holder.firstElementChild;
    if (!box) return;
    (form || live).after(box);
    box.focus();
  }

  async function postBulk(sending, body) {
    const ids = body.getAll("ids");
    if (!ids.length) {
      showMessage("Select at least one approval first (x, or the boxes).", "error");
      return;
    }
    for (const id of ids) setDeciding(id, true);
    try {
      const { response, data } = await postForm(sending, body);
      if (response.status === 409 && data.confirm_html) {
        showMessage(data.error, "error", { announce: false }); // the confirmation, focused, is read instead
        showTwinsConfirmation(data.confirm_html);
      } else if (!response.ok) showMessage(data.error || `Nothing was recorded (HTTP ${response.status}).`, "error");
      else {
        showMessage(data.message, data.already.length || data.refused.length ? "warning" : "success");
        const reason = form?.querySelector("input[name=reason]");
        if (reason) reason.value = "";
        document.getElementById("bulk-twins")?.remove();
      }
    } catch {
      showMessage("Network error: the decisions may not have been recorded; check the list.", "error");
    } finally {
      for (const id of ids) setDeciding(id, false);
      await refresh();
    }
  }

  form?.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = new FormData(form); // the cards' checkboxes belong to this form
    if (event.submitter && event.submitter.name) body.set(event.submitter.name, event.submitter.value);
    postBulk(form, body);
  });

  document.addEventListener("submit", (event) => {
    const confirmation = event.target.closest("form.bulk-twins");
    if (!confirmation) return;
    event.preventDefault();
    postBulk(confirmation, new FormData(confirmation));
  });

  document.addEventListener("click", (event) => {
    const cancel = event.target.closest(".bulk-twins-cancel");
    if (!cancel) return;
    event.preventDefault();
    cancel.closest("form.bulk-twins")?.remove();
    form?.querySelector("button[type=submit]")?.focus();
  });

  return { updateCount };
}

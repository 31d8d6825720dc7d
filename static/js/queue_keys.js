// Keyboard for the approval queue: move between calls, open, approve, reject, select.
//
// j/k (or the arrows) move, o/Enter opens the edit box (or the call's own page), a approves,
// r puts the cursor in the reason field (Enter there rejects), x selects for a bulk decision,
// ? shows the keys. Nothing fires while the operator types in a field: Esc leaves the field
// and gives the keys back. The focused call is remembered by id, so the live refresh of the
// list (which replaces its HTML) keeps it.

const CARD = ".approval[data-approval-id]";

function typing(target) {
  return Boolean(target && target.closest && target.closest("input, textarea, select, [contenteditable]"));
}

export function installQueueKeys({ live, help }) {
  let focusedId = null;
  let focusedIndex = 0; // where the focused call was: its successor takes over once it is decided

  const cards = () => [...live.querySelectorAll(CARD)];
  const current = () => (focusedId ? live.querySelector(`${CARD}[data-approval-id="${CSS.escape(focusedId)}"]`) : null);

  function focusCard(card) {
    for (const other of live.querySelectorAll(`${CARD}.focused`)) other.classList.remove("focused");
    if (!card) {
      focusedId = null;
      return;
    }
    focusedId = card.dataset.approvalId;
    focusedIndex = cards().indexOf(card);
    card.classList.add("focused");
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const all = cards();
    if (!all.length) return;
    const at = all.indexOf(current());
    const next = at === -1 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(at + step, 0), all.length - 1);
    focusCard(all[next]);
  }

  function open(card) {
    const edit = card.querySelector("details.edit-args");
    if (edit) {
      edit.open = !edit.open;
      const area = card.querySelector("textarea.edit-arguments");
      if (edit.open && area) {
        area.disabled = false; // the toggle event, which enables it too, comes later
        area.focus();
      }
      return;
    }
    const link = card.querySelector("a.approval-link");
    if (link && new URL(link.href).pathname !== location.pathname) location.assign(link.href);
  }

  function toggleHelp() {
    if (!help) return;
    if (help.open) help.close();
    else help.showModal();
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (typing(event.target)) {
      // Esc leaves the field and returns to the call it belongs to.
      const card = event.target.closest(CARD);
      if (event.key === "Escape" && card && live.contains(card)) {
        event.target.blur();
        focusCard(card);
      }
      return;
    }
    if (help && help.open && event.key !== "?") return; // the dialog has the keys
    // On a button or a link, Enter and Space keep their usual meaning.
    const onControl = event.target.closest && event.target.closest("button, a, summary");
    let card = current();
    const needsCard = ["o", "Enter", "a", "r", "x"].includes(event.key);
    if (needsCard && onControl && event.key === "Enter") return;
    if (needsCard && !card) {
      if (event.key === "Enter") return;
      card = cards()[0];
      if (!card) return;
      focusCard(card);
    }
    switch (event.key) {
      case "j":
      case "ArrowDown":
        move(1);
        break;
      case "k":
      case "ArrowUp":
        move(-1);
        break;
      case "o":
      case "Enter":
        open(card);
        break;
      case "a": {
        const button = card.querySelector(".approve-button");
        if (!button || button.disabled) return;
        button.form.requestSubmit(button);
        break;
      }
      case "r":
        card.querySelector("input[name=reason]")?.focus();
        break;
      case "x": {
        const box = card.querySelector("input.select-approval");
        if (!box) return;
        box.checked = !box.checked;
        box.dispatchEvent(new Event("change", { bubbles: true }));
        break;
      }
      case "?":
        toggleHelp();
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  live.addEventListener("click", (event) => {
    // A click inside a call makes it the focused one, so the keys continue from there.
    const card = event.target.closest(CARD);
    if (card && card !== current()) {
      for (const other of live.querySelectorAll(`${CARD}.focused`)) other.classList.remove("focused");
      focusedId = card.dataset.approvalId;
      focusedIndex = cards().indexOf(card);
      card.classList.add("focused");
    }
  });

  return {
    // After the list was replaced: mark the same call again (focusing it only if it had focus).
    restore(hadFocus) {
      const card = current();
      if (!card) {
        const all = cards();
        if (focusedId && hadFocus && all.length) focusCard(all[Math.min(focusedIndex, all.length - 1)]);
        return;
      }
      card.classList.add("focused");
      if (hadFocus) card.focus({ preventScroll: true });
    },
    hasFocus() {
      const active = document.activeElement;
      return Boolean(active && active.matches && active.matches(CARD) && live.contains(active));
    },
    toggleHelp,
  };
}

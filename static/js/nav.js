import { when } from "./dom.js";

// The header's links fold behind a Menu button at phone width; wider, they are always shown.
// Without JavaScript nothing folds (the button stays hidden).
const toggle = document.getElementById("menu-toggle");
const menu = document.getElementById("topbar-menu");
const phone = window.matchMedia("(max-width: 760px)");

function fold(folded) {
  menu.classList.toggle("folded", folded);
  toggle.setAttribute("aria-expanded", String(!folded));
}

function fit() {
  toggle.hidden = !phone.matches;
  fold(phone.matches);
}

if (toggle && menu) {
  toggle.addEventListener("click", () => fold(!menu.classList.contains("folded")));
  phone.addEventListener("change", fit);
  fit();
}

// A table wider than the screen scrolls inside itself (app.css): it takes the keyboard focus, so
// people without a pointer can scroll it too.
function focusableWhenScrolling() {
  for (const table of document.querySelectorAll("main table")) {
    if (table.scrollWidth > table.clientWidth + 1) table.setAttribute("tabindex", "0");
    else if (table.getAttribute("tabindex") === "0") table.removeAttribute("tabindex");
  }
}
window.addEventListener("resize", focusableWhenScrolling);
window.addEventListener("load", focusableWhenScrolling);
focusableWhenScrolling();

// Times the server wrote in its own zone (<time data-local datetime=...>) are shown in the
// reader's, as the live timeline does; the server's text stays in the title.
for (const node of document.querySelectorAll("time[data-local][datetime]")) {
  const local = when(node.getAttribute("datetime"));
  if (!local) continue;
  node.title = node.textContent.trim();
  node.textContent = local;
}

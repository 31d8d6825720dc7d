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

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

// The run history's filters fold away at a phone's width, so that its first screen shows runs; they
// stay open when a filter is set (the person is working with them) and on wider screens. A classic
// script right after the filters: it runs before the page is first drawn, so nothing jumps.
(() => {
  const box = document.getElementById("history-filter-box");
  if (box && !("filtered" in box.dataset) && window.matchMedia("(max-width: 760px)").matches) box.open = false;
})();

// The experiment page while it runs: polls its progress every 1.5 s and, when a case was scored
// (or the experiment ended), swaps in the page's new scorecard: no reload, the reader keeps their place.
const POLL_MS = 1500;

async function refresh(scorecard) {
  const progress = await fetch(scorecard.dataset.progressUrl, { headers: { Accept: "application/json" } });
  if (!progress.ok) return;
  const state = await progress.json();
  if (String(state.cases_done) === scorecard.dataset.done && state.status === scorecard.dataset.status) return;
  const page = await fetch(window.location.href, { headers: { Accept: "text/html" } });
  if (!page.ok) return;
  const fresh = new DOMParser().parseFromString(await page.text(), "text/html");
  const next = fresh.getElementById("scorecard");
  const status = fresh.getElementById("experiment-status");
  if (next) scorecard.replaceWith(next);
  if (status) document.getElementById("experiment-status").replaceWith(status);
}

async function watch() {
  let scorecard = document.getElementById("scorecard");
  while (scorecard && scorecard.dataset.status === "running") {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    try {
      await refresh(scorecard);
    } catch (error) {
      // A network blip: the next tick tries again.
    }
    scorecard = document.getElementById("scorecard");
  }
}

watch();

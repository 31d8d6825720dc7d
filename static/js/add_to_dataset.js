// "Add to a dataset": choosing another step prefills the checks of what the run did from that
// step, as long as the person has not edited them yet (their edits are never thrown away).
const step = document.getElementById("id_step");
const checks = document.getElementById("id_expectations");
if (step && checks) {
  const untouched = checks.value;
  step.addEventListener("change", () => {
    if (checks.value !== untouched) return;
    const url = new URL(window.location.href);
    if (step.value) url.searchParams.set("step", step.value);
    else url.searchParams.delete("step");
    window.location.assign(url);
  });
}

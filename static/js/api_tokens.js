// The tokens page: "Copy the key" puts the new key on the clipboard and says so.
const button = document.getElementById("token-copy");
const state = document.getElementById("token-copy-state");

button?.addEventListener("click", async () => {
  const field = document.getElementById(button.dataset.copies);
  try {
    await navigator.clipboard.writeText(field.value);
    state.textContent = "The key is on your clipboard.";
  } catch {
    field.select();  // the clipboard is refused (an insecure page, a browser setting): select it to copy by hand
    state.textContent = "This browser does not let the page copy: the key is selected, copy it with your keyboard.";
  }
});

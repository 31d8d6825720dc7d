// "Your settings": turns the notification and the sound for calls to decide on and off
// (notify.js keeps them in this browser and does the announcing). The browser's permission
// prompt appears only when the person turns notifications on.

import { askForAnnouncements, notificationsSupported, playChime, preferences, showNotification } from "./notify.js";

const page = document.getElementById("personal-settings");
const notifyToggle = document.getElementById("notify-toggle");
const soundToggle = document.getElementById("sound-toggle");
const tryButton = document.getElementById("notify-try");
const state = document.getElementById("notify-state");

const BLOCKED = "This browser blocks notifications from this site: allow them in the browser's site settings, then turn this on again.";

function say(text) {
  state.textContent = text;
}

function showState() {
  notifyToggle.checked = preferences.notify();
  soundToggle.checked = preferences.sound();
  if (!notificationsSupported()) {
    notifyToggle.disabled = true;
    say("This browser cannot show notifications; the sound still works.");
  } else if (preferences.notify() && Notification.permission === "denied") {
    say(BLOCKED);
  } else {
    say(preferences.notify() ? "On: calls you may decide show a notification." : "");
  }
}

async function turnNotificationsOn() {
  let permission = Notification.permission;
  if (permission === "default") permission = await Notification.requestPermission();
  if (permission !== "granted") {
    notifyToggle.checked = false;
    say(BLOCKED);
    return;
  }
  preferences.setNotify(true);
  say("On: calls you may decide show a notification.");
}

if (page && page.dataset.mayDecide === "true") {
  notifyToggle.disabled = soundToggle.disabled = tryButton.disabled = false;
  showState();
  notifyToggle.addEventListener("change", async () => {
    if (notifyToggle.checked) {
      await turnNotificationsOn();
    } else {
      preferences.setNotify(false);
      say("");
    }
    askForAnnouncements();
  });
  soundToggle.addEventListener("change", () => {
    preferences.setSound(soundToggle.checked);
    if (soundToggle.checked) playChime();
    askForAnnouncements();
  });
  tryButton.addEventListener("click", () => {
    if (preferences.notify()) {
      showNotification({
        title: "cancel_order waits for your decision",
        body: "An example: a real notification names the call's tool and run.",
        url: page.dataset.queueUrl,
        tag: "approval-example",
      });
    }
    if (preferences.sound()) playChime();
    if (!preferences.notify() && !preferences.sound()) say("Turn on the notification or the sound first.");
  });
}

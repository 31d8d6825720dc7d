// A browser notification and a short sound when a call arrives that this person may decide.
//
// Loaded on every page (base.html) for people who may see approvals. Both are off until the
// person turns them on in "Your settings" (personal_settings.js); the choices live in this
// browser's localStorage, like the browser's own notification permission, which is per browser
// and per site. When one is on, the page asks the approvals socket (badge.js) for announcements;
// the server sends {type: "approval.to_decide", approval_id, run_id, tool, task, url} only for
// calls this person may decide (their role, their groups, not a two-person call of a run they
// launched), checked again for each call.

import { send, subscribe } from "./badge.js";

const NOTIFY_KEY = "agentsite.notify";
const SOUND_KEY = "agentsite.sound";
// The approvals announced lately, so that a second tab of the same person stays quiet.
const TOLD_KEY = "agentsite.notified";
const TOLD_KEPT = 50;

function stored(key) {
  try {
    return localStorage.getItem(key) === "on";
  } catch {
    return false; // storage refused (a private window's policy): everything stays off
  }
}

function store(key, on) {
  try {
    if (on) localStorage.setItem(key, "on");
    else localStorage.removeItem(key);
  } catch {
    // Not kept: the switch goes back to off on the next page.
  }
}

export const preferences = {
  notify: () => stored(NOTIFY_KEY),
  sound: () => stored(SOUND_KEY),
  setNotify: (on) => store(NOTIFY_KEY, on),
  setSound: (on) => store(SOUND_KEY, on),
};

export function notificationsSupported() {
  return typeof window.Notification === "function";
}

// Two short rising tones, made on the spot (no audio file). A browser may keep the sound off
// until the person has clicked on the page once: then it stays silent, the notification shows.
export function playChime() {
  const AudioContext = window.AudioContext || window.webkitAudioContext;
  if (!AudioContext) return;
  const context = new AudioContext();
  const start = context.currentTime + 0.02;
  [660, 880].forEach((frequency, n) => {
    const oscillator = context.createOscillator();
    const gain = context.createGain();
    const at = start + n * 0.18;
    oscillator.type = "sine";
    oscillator.frequency.value = frequency;
    gain.gain.setValueAtTime(0.0001, at);
    gain.gain.exponentialRampToValueAtTime(0.2, at + 0.02);
    gain.gain.exponentialRampToValueAtTime(0.0001, at + 0.16);
    oscillator.connect(gain).connect(context.destination);
    oscillator.start(at);
    oscillator.stop(at + 0.17);
  });
  setTimeout(() => context.close(), 800);
}

export function showNotification({ title, body, url, tag }) {
  if (!notificationsSupported() || Notification.permission !== "granted") return null;
  const notification = new Notification(title, { body, tag });
  notification.onclick = () => {
    window.focus();
    if (url) window.location.assign(url);
    notification.close();
  };
  return notification;
}

// Whether this browser already announced the approval (another tab did): the first tab to
// claim it announces it.
function claim(approvalId) {
  let told = [];
  try {
    told = JSON.parse(localStorage.getItem(TOLD_KEY) || "[]");
  } catch {
    told = [];
  }
  if (!Array.isArray(told)) told = [];
  if (told.includes(approvalId)) return false;
  told.push(approvalId);
  try {
    localStorage.setItem(TOLD_KEY, JSON.stringify(told.slice(-TOLD_KEPT)));
  } catch {
    // Not kept: another tab may announce it too.
  }
  return true;
}

// Asks the socket for announcements when one of the two is on (the settings page, right after
// a switch is turned on, so that it counts from now without a reload).
export function askForAnnouncements() {
  if (preferences.notify() || preferences.sound()) send({ type: "announce" });
}

function announce(message) {
  const notify = preferences.notify();
  const sound = preferences.sound();
  if ((!notify && !sound) || !claim(message.approval_id)) return;
  if (notify) {
    showNotification({
      title: `${message.tool} waits for your decision`,
      body: `Run ${message.run_id}: ${message.task}`,
      url: message.url,
      tag: `approval-${message.approval_id}`,
    });
  }
  if (sound) playChime();
}

subscribe((message) => {
  if (message.type === "socket.open") {
    // After every (re)connect: the server forgets a closed socket's wish.
    askForAnnouncements();
  } else if (message.type === "announcing") {
    document.documentElement.dataset.announcing = "on";
  } else if (message.type === "socket.closed") {
    delete document.documentElement.dataset.announcing;
  } else if (message.type === "approval.to_decide") {
    announce(message);
  }
});

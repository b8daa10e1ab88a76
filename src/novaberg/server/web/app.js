// The page's entry point: language, signing in and out, the views, the event stream.
import { dropKey, followEvents, getJSON, key, pastedKey, setKey } from "./api.js";
import { addFollowup, isRunning, newConversation, refreshConversations, resetChat, setupChat, stop } from "./chat.js";
import { $, setText } from "./dom.js";
import { setLanguage, t } from "./i18n.js";
import { resetMemory, setupMemory, showMemory } from "./memory.js";
import { loadStats, resetStats, setupStats } from "./stats.js";
import { notifyIfAway, setUpNotifications } from "./notify.js";
import { clearBanners, errorBanner } from "./ui.js";
import { resetVoice, setupVoice } from "./voice.js";
import { resetWhy, setupWhy } from "./why.js";

const VIEWS = ["chat", "memory", "stats"];
let stopEvents = null;

function show(view) {
  const signedIn = Boolean(key());
  $("view-signin").hidden = signedIn;
  $("nav").hidden = !signedIn;
  const chosen = signedIn ? (VIEWS.includes(view) ? view : "chat") : null;
  for (const v of VIEWS) $(`view-${v}`).hidden = v !== chosen;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.view === chosen) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (chosen === "memory") showMemory();
  else if (chosen === "stats") loadStats();
  else if (chosen === "chat") refreshConversations();
}

function route() {
  show(location.hash.slice(1));
}

function onEvent({ event, data }) {
  if (event === "followup") {
    addFollowup(data.turn_id, data.text, data.conversation_id, data.origin);
    if (data.origin === "proactive") notifyIfAway(data.text);
  }
  else if (event === "job" && !$("view-memory").hidden) showMemory();
}

function signedIn() {
  stopEvents?.();
  stopEvents = followEvents(onEvent);
  route();
  if ($("view-chat").hidden === false) $("message").focus();
}

/** Empties every view, dialog and cache of the page, and stops the last key's event stream. */
function forgetEverything() {
  stopEvents?.();
  stopEvents = null;
  for (const dialog of document.querySelectorAll("dialog[open]")) dialog.close();
  resetChat();
  resetVoice();
  resetWhy();
  resetMemory();
  resetStats();
  clearBanners();
}

function codePoint(ch) {
  return `${ch} U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

async function signIn(event) {
  event.preventDefault();
  const { key: value, foreign } = pastedKey($("key").value);
  const error = $("signin-error");
  setText(error, "");
  if (foreign.length) {
    const chars = foreign.slice(0, 8).map(codePoint).join(", ") + (foreign.length > 8 ? ", …" : "");
    setText(error, t("key_foreign", { chars }));
    return;
  }
  if (!value) return;
  forgetEverything(); // a view is emptied before anything loads for this key
  setKey(value);
  try {
    await getJSON("/api/conversations?limit=1");
  } catch (err) {
    dropKey();
    if (err.status === 401) setText(error, t("key_refused"));
    else errorBanner(err);
    return;
  }
  $("key").value = "";
  clearBanners();
  newConversation();
  signedIn();
}

function signOut() {
  dropKey(); // aborts every request of this key
  forgetEverything();
  history.replaceState(null, "", "/");
  show(null);
  $("key").focus();
}

async function boot() {
  try {
    const config = await getJSON("/web/config.json");
    setLanguage(config.language);
  } catch {
    setLanguage("en");
  }
  setupChat();
  setupVoice();
  setUpNotifications();
  setupWhy();
  setupMemory();
  setupStats();
  $("signin-form").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", route);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && isRunning() && !document.querySelector("dialog[open]")) {
      e.preventDefault();
      stop();
    }
  });
  if (key()) signedIn();
  else {
    show(null);
    $("key").focus();
  }
  document.body.dataset.ready = "true";
}

boot();

// The chat: conversations, sending (streamed when the server streams), the pipeline's
// progress on one live line, follow-ups from the turn and from /api/events, stopping a turn.
import { ApiError, getJSON, key, readEvents, request, sessionSignal } from "./api.js";
import { $, clear, h, setText, when } from "./dom.js";
import { lang, t } from "./i18n.js";
import { errorBanner } from "./ui.js";
import { follow, startReply } from "./voice.js";
import { openWhy } from "./why.js";

const state = {
  conversation: null, // the open conversation's id; null: the next message starts one
  running: null, // the AbortController of the turn being sent
  shown: new Set(), // turn ids whose Nova message is on screen
  pending: [], // follow-ups that arrived before their conversation was known
  queued: false, // sent while a turn was still finishing: goes out when that one has
};

function whyButton(turnId) {
  return h(
    "button",
    {
      type: "button",
      class: "why-button",
      "aria-label": `${t("why")} (${turnId})`,
      "data-turn": turnId,
      onclick: () => openWhy(turnId),
    },
    t("why"),
  );
}

function message(role, text, turnId, label) {
  const who = label || (role === "user" ? t("you") : t("nova"));
  const body = h("p", { class: "text", text });
  const li = h(
    "li",
    { class: `message ${role}`, "data-turn": turnId ?? "" },
    h("span", { class: "who" }, who),
    body,
  );
  if (role !== "user" && turnId) {
    li.append(whyButton(turnId));
    state.shown.add(Number(turnId));
  }
  $("messages").append(li);
  li.scrollIntoView({ block: "end" });
  return li;
}

function setTurn(li, turnId) {
  if (!turnId || li.dataset.turn) return;
  li.dataset.turn = turnId;
  li.append(whyButton(turnId));
  state.shown.add(Number(turnId));
}

export function addFollowup(turnId, text, conversation, origin) {
  if (!turnId || state.shown.has(Number(turnId))) return;
  if (conversation !== undefined && conversation !== state.conversation) {
    if (state.running) state.pending.push({ turnId, text, conversation, origin });
    else refreshConversations();
    return;
  }
  message("followup", text, turnId, t(origin === "proactive" ? "proactive" : "followup"));
}

function progress(text) {
  setText($("progress"), text || "");
}

export async function refreshConversations() {
  if (!key()) return; // signed out meanwhile
  const list = $("conversation-list");
  let items;
  try {
    items = (await getJSON("/api/conversations")).items;
  } catch (err) {
    errorBanner(err);
    return;
  }
  clear(list);
  if (!items.length) list.append(h("li", { class: "muted" }, t("no_conversations")));
  for (const c of items) {
    const current = c.id === state.conversation;
    list.append(
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "conversation",
            "data-conversation": c.id,
            "aria-current": current ? "true" : null,
            onclick: () => openConversation(c.id),
          },
          `${t("conversation")} ${c.id}`,
          h("small", {}, ` ${when(c.created_at, lang)} · ${c.turns} ${t(c.turns === 1 ? "turn" : "turns")}`),
        ),
      ),
    );
  }
}

export async function openConversation(id) {
  const signal = sessionSignal();
  state.conversation = id;
  state.queued = false; // a message waiting for the last turn stays in the box, unsent
  state.shown.clear();
  clear($("messages"));
  progress("");
  try {
    const { items } = await getJSON(`/api/conversations/${id}/messages`);
    for (const m of items) {
      if (m.origin === "proactive") message("followup", m.content, m.turn_id, t("proactive"));
      else message(m.role === "user" ? "user" : "nova", m.content, m.turn_id);
    }
  } catch (err) {
    errorBanner(err);
  }
  if (signal.aborted) return; // signed out meanwhile
  refreshConversations();
  $("message").focus();
}

export function newConversation() {
  state.conversation = null;
  state.queued = false;
  state.shown.clear();
  clear($("messages"));
  progress("");
  refreshConversations();
  $("message").focus();
}

function finish(li, result) {
  state.conversation = result.conversation_id;
  setText(li.querySelector(".text"), result.reply);
  follow(result.reply, true); // read aloud: what of it was not yet
  setTurn(li, result.turn_id);
  for (const f of result.followups || []) addFollowup(f.turn_id, f.reply);
}

async function send() {
  const box = $("message");
  const text = box.value.trim();
  if (!text) return;
  if (state.running) { // the answer is shown but the turn is still being judged and stored
    state.queued = true; // the text stays in the box, editable, until it goes out
    progress(t("progress_queued"));
    return;
  }
  state.queued = false;
  box.value = "";
  startReply(); // read aloud when Talk heard it
  message("user", text);
  const li = message("nova", "");
  li.setAttribute("aria-busy", "true");
  const controller = new AbortController();
  state.running = controller;
  $("stop").hidden = false;
  progress(t("progress_waiting"));
  const trail = [];
  let stopped = false;
  let failed = false;
  try {
    const response = await request("POST", "/api/turns?stream=true", {
      json: { message: text, conversation_id: state.conversation },
      signal: controller.signal,
      accept: "text/event-stream, application/json",
    });
    if ((response.headers.get("Content-Type") || "").includes("text/event-stream")) {
      let streamed = "";
      await readEvents(response, ({ event, data }) => {
        if (event === "start") {
          state.conversation = data.conversation_id; // its Why? comes with the answer
        } else if (event === "progress") {
          if (trail[trail.length - 1] !== data.node) trail.push(data.node);
          progress(t("progress_node", { node: trail.join(" → ") }));
        } else if (event === "token") {
          streamed += data.text;
          setText(li.querySelector(".text"), streamed);
          follow(streamed, false);
        } else if (event === "reply") {
          setText(li.querySelector(".text"), data.text);
          setTurn(li, data.turn_id);
        } else if (event === "followup") {
          addFollowup(data.turn_id, data.text);
        } else if (event === "done") {
          finish(li, data);
        } else if (event === "error") {
          failed = true;
          errorBanner(new ApiError(data.status, data.detail, null));
        }
      });
    } else {
      finish(li, await response.json());
    }
  } catch (err) {
    if (err.name === "AbortError") stopped = true;
    else {
      failed = true;
      errorBanner(err);
    }
  } finally {
    li.removeAttribute("aria-busy");
    const answered = Boolean(li.querySelector(".text").textContent);
    if (!answered && (failed || stopped)) li.remove();
    if (state.running === controller) { // not signed out meanwhile (that emptied the chat)
      state.running = null;
      $("stop").hidden = true;
      // before the answer, Stop aborts the turn on the server; after it, the turn is stored
      progress(stopped ? t(answered ? "stopped_answered" : "stopped") : "");
      const waiting = state.pending.splice(0);
      for (const f of waiting) addFollowup(f.turnId, f.text, f.conversation, f.origin);
      refreshConversations();
      if (state.queued && !stopped) send();
      state.queued = false;
    }
  }
}

export function stop() {
  if (state.running) state.running.abort();
}

export function isRunning() {
  return state.running !== null;
}

export function setupChat() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      send();
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-conversation").addEventListener("click", newConversation);
}

export function resetChat() {
  stop();
  state.running = null;
  state.conversation = null;
  state.shown.clear();
  state.pending = [];
  state.queued = false;
  $("stop").hidden = true;
  $("composer").reset(); // a draft too
  clear($("messages"));
  clear($("conversation-list"));
  progress("");
}

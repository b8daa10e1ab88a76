// Talking with Nova: Talk records from the microphone (MediaRecorder) until it is pressed
// again, the words Nova heard (POST /v1/audio/transcriptions) land in the message box to be
// edited and sent, or are sent at once when "Send at once" is on. The reply to a spoken
// message is read aloud sentence by sentence as it arrives (POST /v1/audio/speech for each
// sentence, the next one fetched while the last plays), until Stop speaking or Mute; a typed
// message's reply stays silent. Mute and Send at once are remembered by this browser
// (localStorage); the audio is never kept.
import { request } from "./api.js";
import { $, setText } from "./dom.js";
import { t } from "./i18n.js";
import { errorBanner } from "./ui.js";

const MUTED = "novaberg.voice.muted";
const AT_ONCE = "novaberg.voice.send_at_once";
const SENTENCE = /[^.!?…]*[.!?…]+["'”’)\]]*(?=\s|$)/gu; // a sentence and its closing marks
const SLICE_MS = 250; // how often the recorder hands over what it has

const voice = {
  recorder: null, // the MediaRecorder while Talk records
  started: 0,
  said: 0, // characters of the present reply already queued to be spoken
  heard: false, // the message box holds what Talk heard: its reply is read aloud
  aloud: false, // the reply arriving now is read aloud
  pending: [], // sentences still to fetch and play
  next: null, // the audio of the next sentence (a promise of a blob URL), being fetched
  playing: false,
  generation: 0, // bumped by Stop speaking: what was fetched for an older reply is dropped
};

function status(text) {
  setText($("voice-status"), text || "");
}

function remembered(name) {
  return localStorage.getItem(name) === "true";
}

async function startTalking() {
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch {
    status(t("voice_no_microphone"));
    return;
  }
  const chunks = [];
  const recorder = new MediaRecorder(stream);
  recorder.addEventListener("dataavailable", (e) => {
    if (e.data.size) chunks.push(e.data);
    const seconds = Math.floor((Date.now() - voice.started) / 1000);
    $("talk").dataset.recordedMs = String(Date.now() - voice.started);
    status(t("voice_listening", { seconds }));
  });
  recorder.addEventListener("stop", () => {
    for (const track of stream.getTracks()) track.stop();
    if (!recorder.cancelled) transcribe(new Blob(chunks, { type: recorder.mimeType || "audio/webm" }));
  });
  voice.recorder = recorder;
  voice.started = Date.now();
  recorder.start(SLICE_MS);
  stopSpeaking(); // Nova stops when the user talks
  $("talk").setAttribute("aria-pressed", "true");
  setText($("talk"), t("voice_done"));
  status(t("voice_listening", { seconds: 0 }));
}

function stopTalking() {
  const recorder = voice.recorder;
  voice.recorder = null;
  $("talk").setAttribute("aria-pressed", "false");
  setText($("talk"), t("voice_talk"));
  if (recorder && recorder.state !== "inactive") recorder.stop();
}

async function transcribe(audio) {
  status(t("voice_hearing"));
  const form = new FormData();
  form.append("file", audio, audio.type.includes("ogg") ? "speech.ogg" : "speech.webm");
  form.append("model", "whisper-1");
  try {
    const response = await request("POST", "/v1/audio/transcriptions", { form });
    const { text } = await response.json();
    const box = $("message");
    box.value = box.value.trim() ? `${box.value.trim()} ${text}` : text;
    voice.heard = true;
    status(t("voice_heard"));
    if ($("voice-at-once").checked) $("composer").requestSubmit();
    else box.focus();
  } catch (err) {
    status("");
    if (err.status === 400 || err.status === 501) status(err.detail);
    else errorBanner(err);
  }
}

/** A message is sent: its reply is read aloud if Talk heard it (and Nova is not muted). */
export function startReply() {
  stopSpeaking();
  voice.aloud = voice.heard;
  voice.heard = false;
}

/** The reply so far (`final`: all of it): its sentences not yet queued are spoken. */
export function follow(text, final) {
  if (text === null || text === undefined || !voice.aloud) return;
  if (text.length < voice.said) voice.said = 0; // a new reply
  if ($("voice-mute").checked) {
    voice.said = final ? 0 : text.length;
    return;
  }
  const rest = text.slice(voice.said);
  let spoken = 0;
  for (const match of rest.matchAll(SENTENCE)) {
    enqueue(match[0].trim());
    spoken = match.index + match[0].length;
  }
  if (final) {
    enqueue(rest.slice(spoken).trim());
    voice.said = 0;
  } else voice.said += spoken;
}

function enqueue(sentence) {
  if (!/[\p{L}\p{N}]/u.test(sentence)) return;
  voice.pending.push(sentence);
  voice.next ??= fetchAudio(voice.pending.shift());
  $("voice-stop").hidden = false;
  if (!voice.playing) playNext();
}

/** The sentence's audio as a blob URL (null when it failed or Stop speaking came first). */
function fetchAudio(sentence) {
  const generation = voice.generation;
  return request("POST", "/v1/audio/speech", {
    json: { model: "tts-1", voice: "nova", input: sentence, response_format: "mp3" },
  })
    .then((response) => response.blob())
    .then((blob) => (generation === voice.generation ? URL.createObjectURL(blob) : null))
    .catch((err) => {
      if (generation === voice.generation) errorBanner(err);
      return null;
    });
}

async function playNext() {
  const next = voice.next;
  if (!next) {
    voice.playing = false;
    $("voice-stop").hidden = true;
    return;
  }
  voice.playing = true;
  // one sentence ahead: the next is fetched while this one plays
  voice.next = voice.pending.length ? fetchAudio(voice.pending.shift()) : null;
  const generation = voice.generation;
  const url = await next;
  if (generation !== voice.generation) return;
  if (!url) {
    playNext();
    return;
  }
  const player = $("voice-audio");
  player.src = url;
  try {
    await player.play();
  } catch {
    URL.revokeObjectURL(url);
    playNext();
  }
}

export function stopSpeaking() {
  voice.generation += 1;
  voice.pending = [];
  voice.next = null;
  voice.playing = false;
  voice.said = 0;
  const player = $("voice-audio");
  player.pause();
  player.removeAttribute("src");
  $("voice-stop").hidden = true;
}

export function setupVoice() {
  const canRecord = Boolean(navigator.mediaDevices?.getUserMedia && window.MediaRecorder);
  $("talk").hidden = !canRecord;
  $("voice-mute").checked = remembered(MUTED);
  $("voice-at-once").checked = remembered(AT_ONCE);
  $("talk").addEventListener("click", () => (voice.recorder ? stopTalking() : startTalking()));
  $("voice-stop").addEventListener("click", stopSpeaking);
  $("voice-mute").addEventListener("change", (e) => {
    localStorage.setItem(MUTED, String(e.target.checked));
    if (e.target.checked) stopSpeaking();
  });
  $("voice-at-once").addEventListener("change", (e) => {
    localStorage.setItem(AT_ONCE, String(e.target.checked));
  });
  const player = $("voice-audio");
  player.addEventListener("ended", () => {
    URL.revokeObjectURL(player.src);
    playNext();
  });
}

export function resetVoice() {
  if (voice.recorder) voice.recorder.cancelled = true; // signed out: nothing is sent
  stopTalking();
  stopSpeaking();
  voice.heard = false;
  voice.aloud = false;
  status("");
}

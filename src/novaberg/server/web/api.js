// Talking to the server: the key from sessionStorage (this tab only) in the Authorization
// header, never in a URL; Server-Sent Events read with fetch() and a stream reader
// (EventSource cannot send a header).
// Every request runs under the signed-in key's session: signing out or in aborts all of the
// last key's requests and its event stream, so no answer for it reaches the page afterwards.
const KEY = "novaberg.key";
const SHAPE = /^[\x21-\x7e]+$/; // what a key can be: printable ASCII (an HTTP header's value)
const PASTED = /[\s\p{Cc}\p{Cf}]/gu; // whitespace, NBSP, BOM, zero-width and bidi characters
let session = new AbortController();

function newSession() {
  session.abort();
  session = new AbortController();
}

export function key() {
  const k = sessionStorage.getItem(KEY);
  return k && SHAPE.test(k) ? k : null;
}
export function setKey(value) {
  newSession();
  sessionStorage.setItem(KEY, value);
}
export function dropKey() {
  newSession();
  sessionStorage.removeItem(KEY);
}
/** The signal of the present key's requests: aborted when it signs out or another signs in. */
export function sessionSignal() {
  return session.signal;
}

/**
 * A key as pasted, without the whitespace and invisible characters a copy brings along (a
 * key has none): {key, foreign: the characters left that no key has}.
 */
export function pastedKey(raw) {
  const clean = String(raw).replace(PASTED, "");
  return { key: clean, foreign: [...new Set(clean.replace(/[\x21-\x7e]/g, ""))] };
}

export class ApiError extends Error {
  constructor(status, detail, retryAfter) {
    super(detail);
    this.status = status; // 0: the server could not be reached
    this.detail = detail;
    this.retryAfter = retryAfter;
  }
}

function headers(extra) {
  const out = { ...(extra || {}) };
  const k = key();
  if (k) out.Authorization = `Bearer ${k}`;
  return out;
}

async function failure(response) {
  let detail = response.statusText;
  try {
    const body = await response.json();
    const said = body.detail ?? body.error?.message; // /api's shape, or /v1's (OpenAI's)
    detail = typeof said === "string" ? said : JSON.stringify(said);
  } catch {
    /* not JSON: the status text says enough */
  }
  return new ApiError(response.status, detail, response.headers.get("Retry-After"));
}

/** fetch with the key; a non-2xx answer or a network failure throws ApiError. */
export async function request(method, path, { json, body, form, signal, accept } = {}) {
  const mine = signal ? AbortSignal.any([signal, session.signal]) : session.signal;
  const init = { method, headers: headers(accept ? { Accept: accept } : {}), signal: mine };
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = body;
  } else if (form !== undefined) {
    init.body = form; // FormData: the browser writes its multipart Content-Type
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "unreachable", null);
  }
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJSON(path, options) {
  return (await request("GET", path, options)).json();
}

/** Calls onEvent({event, data, id}) for each event of a text/event-stream response. */
export async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replaceAll("\r\n", "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const event = { event: "message", data: "", id: null };
      const data = [];
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.event = text;
        else if (field === "data") data.push(text);
        else if (field === "id") event.id = text;
      }
      if (!data.length) continue;
      event.data = data.join("\n");
      try {
        event.data = JSON.parse(event.data);
      } catch {
        /* plain text data */
      }
      onEvent(event);
    }
  }
}

/**
 * The user's event stream (GET /api/events), reconnecting with Last-Event-ID so that
 * nothing is missed; returns a function that stops it.
 */
export function followEvents(onEvent, onState) {
  const controller = new AbortController();
  const signal = AbortSignal.any([controller.signal, session.signal]);
  let last = null;
  let wait = 500;
  (async () => {
    while (!signal.aborted) {
      try {
        const extra = { Accept: "text/event-stream" };
        if (last) extra["Last-Event-ID"] = last;
        const response = await fetch("/api/events", {
          headers: headers(extra),
          signal,
        });
        if (response.status === 404 || response.status === 401) {
          onState?.(response.status);
          return; // no event stream on this server, or the key was revoked
        }
        if (!response.ok) throw new Error(String(response.status));
        onState?.(200);
        wait = 500;
        await readEvents(response, (event) => {
          if (event.id) last = event.id;
          onEvent(event);
        });
      } catch {
        if (signal.aborted) return;
        onState?.(0);
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 15000);
    }
  })();
  return () => controller.abort();
}

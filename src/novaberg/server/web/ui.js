// Banners for errors and the confirmation dialog.
import { $, h, setText } from "./dom.js";
import { t } from "./i18n.js";

const shown = new Map(); // kind and text → the banner showing them

/** A banner; the same message twice at once (two requests refused alike) shows once. */
export function banner(text, kind = "error") {
  const id = `${kind}\n${text}`;
  const open = shown.get(id);
  if (open?.isConnected) return open;
  const item = h("div", { class: `banner banner-${kind}` }, h("span", { text }));
  item.append(h("button", { type: "button", class: "dismiss", onclick: () => item.remove() }, t("dismiss")));
  $("banners").append(item);
  shown.set(id, item);
  return item;
}

export function clearBanners() {
  $("banners").replaceChildren();
  shown.clear();
}

/** The banner for a failed request (an ApiError), worded for its status. */
export function errorBanner(err) {
  if (err.name === "AbortError") return null;
  const status = err.status ?? 0;
  if (status === 0) return banner(t("banner_down"));
  if (status === 429) return banner(t("banner_429", { seconds: err.retryAfter || "?" }), "warn");
  if (status === 409) return banner(t("banner_409"), "warn");
  if (status === 401) return banner(t("banner_401"));
  if (status === 502 || status === 503 || status === 504) {
    return banner(t("banner_backend", { status }));
  }
  return banner(t("banner_other", { status, detail: err.detail || "" }));
}

/** Shows the confirmation dialog; resolves true when the user confirms. */
export function confirmDialog(title, body) {
  const dialog = $("confirm");
  setText($("confirm-title"), title);
  $("confirm-body").replaceChildren(...body);
  return new Promise((resolve) => {
    const done = (answer) => {
      $("confirm-ok").onclick = null;
      $("confirm-cancel").onclick = null;
      dialog.onclose = null;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    $("confirm-ok").onclick = () => done(true);
    $("confirm-cancel").onclick = () => done(false);
    dialog.onclose = () => done(false);
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

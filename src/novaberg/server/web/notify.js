// Browser notifications for the messages Nova writes first (proactive), while the tab is in
// the background: the Notification API, asked for by a click (browsers allow nothing else).
// No push service is reachable here: a closed browser sees them in the chat next time.
import { $ } from "./dom.js";
import { t } from "./i18n.js";

function supported() {
  return "Notification" in window;
}

/** Shows the Notify button while notifications can still be allowed. */
export function setUpNotifications() {
  const button = $("notify");
  if (!button) return;
  button.hidden = !supported() || Notification.permission !== "default";
  button.addEventListener("click", async () => {
    if (!supported()) return;
    await Notification.requestPermission();
    button.hidden = Notification.permission !== "default";
  });
}

/** A notification for ``text`` (as plain text) when the tab is hidden and it is allowed. */
export function notifyIfAway(text) {
  if (!supported() || !document.hidden || Notification.permission !== "granted") return;
  new Notification(t("proactive"), { body: String(text) });
}

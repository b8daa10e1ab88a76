// What Nova remembers: list and search (with reasons), provenance, superseded facts, the
// profile with its sources, the timeline, background jobs, forget (with what else goes),
// export (download) and import (upload; the server checks it as the CLI does).
import { getJSON, request } from "./api.js";
import { $, clear, h, setText, when } from "./dom.js";
import { lang, t } from "./i18n.js";
import { confirmDialog, errorBanner } from "./ui.js";
import { openWhy } from "./why.js";

const TABS = ["items", "profile", "timeline", "reminders", "jobs", "transfer"];
const known = new Map(); // id → text of the items last listed (for the profile's sources)
let exported = null; // the object URL of the last export, until it is revoked

function superseded(m) {
  return m.valid_to !== null && m.valid_to !== undefined;
}

function itemRow(m) {
  known.set(m.id, m.text);
  const meta = [m.kind, when(m.created_at, lang), `${t("importance")} ${Number(m.importance).toFixed(2)}`];
  const li = h(
    "li",
    { class: `memory-item${superseded(m) ? " superseded" : ""}`, "data-memory": m.id },
    h("p", { class: "memory-text" }, m.text),
    h(
      "p",
      { class: "meta" },
      superseded(m) ? h("span", { class: "badge badge-superseded" }, t(m.superseded_by ? "superseded" : "retracted")) : null,
      meta.join(" · "),
      m.source_turn_id
        ? h("button", { type: "button", class: "link provenance", onclick: () => openWhy(m.source_turn_id) }, t("from_turn", { id: m.source_turn_id }))
        : null,
    ),
  );
  if (m.reason) li.append(h("p", { class: "reason" }, `${m.reason}${m.score !== undefined ? ` (${m.score})` : ""}`));
  const what = m.text.slice(0, 60);
  if (!superseded(m)) {
    li.append(
      h("button", { type: "button", class: "edit", "aria-label": `${t("edit")}: ${what}`, onclick: () => edit(li, m) }, t("edit")),
      h("button", { type: "button", class: "retract", "aria-label": `${t("retract")}: ${what}`, onclick: () => retract(m.id) }, t("retract")),
    );
  }
  li.append(
    h("button", { type: "button", class: "danger forget", "aria-label": `${t("forget")}: ${what}`, onclick: () => forget(m.id) }, t("forget")),
  );
  return li;
}

/** Edit in place: the item's text in a field, saved as a correction (PATCH /api/memory/ID). */
function edit(li, m) {
  const field = h("textarea", { class: "edit-text", "aria-label": t("new_text"), rows: 2 });
  field.value = m.text;
  const form = h(
    "form",
    { class: "edit-form" },
    field,
    h("button", { type: "submit" }, t("save")),
    h("button", { type: "button", onclick: () => loadItems(lastQuery) }, t("cancel")),
  );
  form.onsubmit = async (event) => {
    event.preventDefault();
    try {
      await request("PATCH", `/api/memory/${m.id}`, { json: { text: field.value } });
      await loadItems(lastQuery);
      setText($("memory-summary"), t("corrected_done"));
    } catch (err) {
      errorBanner(err);
    }
  };
  li.querySelector(".memory-text").replaceWith(form);
  field.focus();
}

async function retract(id) {
  try {
    await request("POST", `/api/memory/${id}/retract`);
    await loadItems(lastQuery);
    setText($("memory-summary"), t("retracted_done"));
  } catch (err) {
    errorBanner(err);
  }
}

let lastQuery = null;

export async function loadItems(query) {
  lastQuery = query || null;
  const list = $("memory-list");
  try {
    const path = lastQuery ? `/api/memory?query=${encodeURIComponent(lastQuery)}` : "/api/memory?limit=500";
    const { items } = await getJSON(path);
    clear(list);
    for (const m of items) list.append(itemRow(m));
    setText(
      $("memory-summary"),
      lastQuery
        ? t("memory_found", { n: items.length, q: lastQuery })
        : items.length
          ? t("memory_count", { n: items.length })
          : t("memory_none"),
    );
  } catch (err) {
    errorBanner(err);
  }
}

async function forget(id) {
  let family;
  try {
    family = await getJSON(`/api/memory/${id}/family`);
  } catch (err) {
    errorBanner(err);
    return;
  }
  const [self, ...others] = family.items;
  const body = [h("p", { class: "memory-text" }, self ? self.text : String(id))];
  if (others.length) {
    body.push(h("p", {}, t("confirm_also")));
    body.push(h("ul", { class: "also" }, others.map((o) => h("li", {}, `${o.text} (${o.kind})`))));
  }
  if (family.source_turns.length) body.push(h("p", {}, t("confirm_turns", { n: family.source_turns.length })));
  if (!(await confirmDialog(t("confirm_title"), body))) return;
  try {
    const done = await (await request("DELETE", `/api/memory/${id}`)).json();
    setText($("memory-summary"), t("forgotten", { n: done.ids.length }));
    await loadItems(lastQuery);
    setText($("memory-summary"), t("forgotten", { n: done.ids.length }));
  } catch (err) {
    errorBanner(err);
  }
}

async function loadProfile() {
  const panel = clear($("panel-profile"));
  try {
    const profile = await getJSON("/api/memory/profile");
    const wanted = Object.values(profile).flatMap((p) => p.statements.flatMap((st) => st.sources));
    if (wanted.some((id) => !known.has(id))) {
      try {
        for (const m of (await getJSON("/api/memory?limit=1000")).items) known.set(m.id, m.text);
      } catch (err) {
        if (err.name === "AbortError") return;
        errorBanner(err); // the profile shows, its sources by number only
      }
    }
    const parts = Object.keys(profile);
    if (!parts.length) panel.append(h("p", { class: "muted" }, t("profile_none")));
    for (const part of ["core", "adaptive"].filter((p) => parts.includes(p))) {
      const p = profile[part];
      panel.append(
        h("h3", {}, `${t(`profile_${part}`)} (${t("version")} ${p.version}, ${when(p.created_at, lang)})`),
        h(
          "ul",
          { class: "statements" },
          p.statements.map((st) =>
            h(
              "li",
              {},
              h("p", {}, st.text),
              h("small", {}, `${t("sources")}: ${st.sources.length ? st.sources.map((id) => `#${id}${known.has(id) ? ` “${known.get(id)}”` : ""}`).join(", ") : t("none")}`),
            ),
          ),
        ),
      );
    }
  } catch (err) {
    errorBanner(err);
  }
}

async function loadTimeline() {
  const panel = clear($("panel-timeline"));
  try {
    const { items } = await getJSON("/api/memory?kind=event&limit=1000");
    items.sort((a, b) => String(a.happens_on).localeCompare(String(b.happens_on)));
    if (!items.length) panel.append(h("p", { class: "muted" }, t("timeline_none")));
    else panel.append(h("ol", { class: "timeline" }, items.map((e) => h("li", {}, h("time", { datetime: e.happens_on }, e.happens_on), " ", e.text))));
  } catch (err) {
    errorBanner(err);
  }
}

// What Nova will write first (GET /api/proactive), soonest first, each with its cause and a
// Cancel button (DELETE /api/proactive/{id}).
async function loadReminders() {
  const panel = clear($("panel-reminders"));
  try {
    const { scheduled } = await getJSON("/api/proactive");
    if (!scheduled.length) {
      panel.append(h("p", { class: "muted" }, t("reminders_none")));
      return;
    }
    panel.append(
      h(
        "ul",
        { class: "reminders" },
        scheduled.map((r) =>
          h(
            "li",
            { "data-reminder": r.id },
            h("time", { datetime: r.due_at }, when(r.due_at, lang)),
            " ",
            h("span", { class: "reminder-text" }, r.text),
            " ",
            h("small", { class: "muted" }, `${r.kind}, ${r.cause}${r.repeat ? `, ${r.repeat}` : ""}`),
            " ",
            h("button", { type: "button", onclick: () => cancelReminder(r.id) }, t("cancel_reminder")),
          ),
        ),
      ),
    );
  } catch (err) {
    errorBanner(err);
  }
}

async function cancelReminder(id) {
  try {
    await request("DELETE", `/api/proactive/${id}`);
  } catch (err) {
    errorBanner(err);
  }
  await loadReminders();
}

async function loadJobs() {
  const panel = clear($("panel-jobs"));
  try {
    const { items } = await getJSON("/api/memory/jobs");
    if (!items.length) {
      panel.append(h("p", { class: "muted" }, t("jobs_none")));
      return;
    }
    panel.append(
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "jobs" },
          h("thead", {}, h("tr", {}, [t("job_type"), t("job_status"), t("result"), t("job_turn"), t("job_when")].map((x) => h("th", { scope: "col" }, x)))),
          h(
            "tbody",
            {},
            items
              .slice()
              .reverse()
              .map((j) =>
                h(
                  "tr",
                  {},
                  h("td", {}, j.type),
                  h("td", {}, h("span", { class: `badge job-${j.status}` }, j.status)),
                  h("td", {}, j.result ?? ""),
                  h("td", {}, j.turn_id ? h("button", { type: "button", class: "link", onclick: () => openWhy(j.turn_id) }, String(j.turn_id)) : ""),
                  h("td", {}, when(j.updated_at, lang)),
                ),
              ),
          ),
        ),
      ),
    );
  } catch (err) {
    errorBanner(err);
  }
}

async function exportFile() {
  try {
    const blob = await (await request("GET", "/api/memory/export")).blob();
    const url = URL.createObjectURL(blob);
    exported = url;
    const a = h("a", { href: url, download: "novaberg-memory.json", hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    errorBanner(err);
  }
}

async function importFile(file) {
  const status = $("transfer-status");
  try {
    const result = await (await request("POST", "/api/memory/import", { body: await file.text() })).json();
    const counts = Object.entries(result.imported).map(([k, v]) => `${k} ${v}`).join(", ");
    setText(status, t("imported", { counts }));
  } catch (err) {
    if (err.status === 400) setText(status, t("import_failed", { detail: err.detail }));
    else errorBanner(err);
  }
  $("import-file").value = "";
}

function mark(tab) {
  for (const name of TABS) {
    const on = name === tab;
    $(`tab-${name}`).setAttribute("aria-selected", String(on));
    $(`tab-${name}`).tabIndex = on ? 0 : -1;
    $(`panel-${name}`).hidden = !on;
  }
}

function select(tab) {
  mark(tab);
  if (tab === "items") loadItems(lastQuery);
  else if (tab === "profile") loadProfile();
  else if (tab === "timeline") loadTimeline();
  else if (tab === "reminders") loadReminders();
  else if (tab === "jobs") loadJobs();
}

export function showMemory() {
  select(TABS.find((n) => $(`tab-${n}`).getAttribute("aria-selected") === "true") || "items");
}

/** Forgets everything shown or cached for the last key (sign-out, another key signing in). */
export function resetMemory() {
  known.clear();
  lastQuery = null;
  if (exported) URL.revokeObjectURL(exported);
  exported = null;
  $("memory-search").reset();
  $("import-file").value = "";
  for (const id of ["memory-list", "memory-summary", "transfer-status"]) clear($(id));
  for (const name of ["profile", "timeline", "jobs"]) clear($(`panel-${name}`));
  mark("items");
}

export function setupMemory() {
  TABS.forEach((name, i) => {
    const tab = $(`tab-${name}`);
    tab.addEventListener("click", () => select(name));
    tab.addEventListener("keydown", (e) => {
      const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
      if (!step) return;
      const next = TABS[(i + step + TABS.length) % TABS.length];
      select(next);
      $(`tab-${next}`).focus();
    });
  });
  $("memory-search").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("memory-query").value.trim();
    loadItems(q || null);
  });
  $("memory-clear").addEventListener("click", () => {
    $("memory-query").value = "";
    loadItems(null);
  });
  $("export").addEventListener("click", exportFile);
  $("import-file").addEventListener("change", (e) => {
    const [file] = e.target.files;
    if (file) importFile(file);
  });
}

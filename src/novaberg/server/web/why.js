// The Why panel of one reply: GET /api/turns/{id} (the turn's contract object) and
// GET /api/turns/{id}/why (the trace's details): a waterfall of the calls on a time axis,
// the thinker, every judge's vote per round, the corrections, salience, the memories given.
import { getJSON } from "./api.js";
import { $, clear, h, ms, outcomeClass, s, setText } from "./dom.js";
import { t } from "./i18n.js";

const ROW = 22;

/** Each call's [start of its queue wait, sent, end] in ms since the turn began. */
function spans(calls, sent) {
  const recorded = Array.isArray(sent) && sent.length === calls.length && sent.every((x) => x !== null);
  let cursor = 0;
  return {
    recorded,
    rows: calls.map((c, i) => {
      const wait = c.queue_wait_ms || 0;
      const start = recorded ? Math.max(0, sent[i]) : cursor + wait;
      cursor = start + (c.ms || 0);
      return [Math.max(0, start - wait), start, start + (c.ms || 0)];
    }),
  };
}

function tickStep(total) {
  const raw = total / 5;
  const pow = 10 ** Math.floor(Math.log10(Math.max(raw, 0.001)));
  for (const m of [1, 2, 5, 10]) if (raw <= m * pow) return m * pow;
  return 10 * pow;
}

function waterfall(calls, sent, space) {
  // drawn in the pixels it gets (so its text keeps its size on a phone)
  const WIDTH = Math.round(Math.max(300, Math.min(900, space || 640)));
  const LABEL = WIDTH < 500 ? 105 : 130;
  const { recorded, rows } = spans(calls, sent);
  const total = Math.max(1, ...rows.map((r) => r[2]));
  const plot = WIDTH - LABEL - 10;
  const x = (v) => LABEL + (v / total) * plot;
  const height = calls.length * ROW + 30;
  const svg = s("svg", {
    class: "waterfall",
    viewBox: `0 0 ${WIDTH} ${height}`,
    role: "img",
    "aria-label": `${t("why_calls")}: ${calls.length}, ${ms(total)}`,
  });
  const step = tickStep(total);
  for (let v = 0; v <= total + 1e-9; v += step) {
    svg.append(
      s("line", { class: "tick", x1: x(v), x2: x(v), y1: 0, y2: calls.length * ROW }),
      s("text", { class: "tick-label", x: x(v), y: calls.length * ROW + 14, "text-anchor": "middle" }, ms(v)),
    );
  }
  svg.append(s("text", { class: "axis-label", x: WIDTH - 10, y: height - 2, "text-anchor": "end" }, t("why_axis")));
  calls.forEach((c, i) => {
    const [queued, start, end] = rows[i];
    const y = i * ROW + 3;
    const g = s("g", { class: "call-row", "data-caller": c.caller });
    g.append(s("title", {}, `${c.caller} · ${c.backend} · ${c.model} · ${t("queue_wait")} ${ms(c.queue_wait_ms)} · ${t("run_time")} ${ms(c.ms)} · ${c.outcome}`));
    g.append(s("text", { class: "call-label", x: LABEL - 6, y: y + 13, "text-anchor": "end" }, c.caller));
    if (start > queued) {
      g.append(s("rect", { class: "bar-queue", x: x(queued), y, width: Math.max(1, x(start) - x(queued)), height: ROW - 6 }));
    }
    g.append(s("rect", { class: `bar ${outcomeClass(c.outcome).split(" ")[1]}`, x: x(start), y, width: Math.max(2, x(end) - x(start)), height: ROW - 6 }));
    svg.append(g);
  });
  const outcomes = [...new Set(calls.map((c) => c.outcome))];
  const legend = h(
    "p",
    { class: "legend-line" },
    h("span", { class: "legend queue" }, t("queue_wait")),
    `${t("run_time")}: `,
    outcomes.map((o) => h("span", { class: outcomeClass(o) }, o)),
  );
  const parts = [svg, legend];
  if (!recorded) parts.unshift(h("p", { class: "muted" }, t("why_no_times")));
  return parts;
}

function callTable(calls) {
  const head = ["caller", "backend", "model", "queue_wait", "run_time", "outcome"];
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "calls" },
      h("caption", { class: "sr-only" }, t("why_calls")),
      h("thead", {}, h("tr", {}, head.map((k) => h("th", { scope: "col" }, t(k))))),
      h(
        "tbody",
        {},
        calls.map((c) =>
          h(
            "tr",
            {},
            h("td", {}, c.caller),
            h("td", {}, c.backend),
            h("td", {}, c.model),
            h("td", { class: "num" }, ms(c.queue_wait_ms)),
            h("td", { class: "num" }, ms(c.ms)),
            h("td", {}, h("span", { class: outcomeClass(c.outcome) }, c.outcome), c.error ? ` ${c.error}` : ""),
          ),
        ),
      ),
    ),
  );
}

function section(title, ...children) {
  return h("section", { class: "why-section" }, h("h3", {}, title), ...children);
}

function toolName(tool) {
  if (tool && typeof tool === "object") return tool.name || tool.tool || JSON.stringify(tool);
  return String(tool);
}

function thinker(th) {
  if (!th) return null;
  const tools = (th.tools || []).map(toolName);
  return section(
    t("why_thinker"),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, t("result")), h("dd", {}, h("span", { class: `badge thinker-${th.result}` }, th.result)),
      h("dt", {}, t("iterations")), h("dd", {}, th.iterations ?? 0),
      h("dt", {}, t("followup_calls")), h("dd", {}, th.followup_calls ?? 0),
      h("dt", {}, t("tools")), h("dd", {}, tools.length ? tools.join(", ") : t("none")),
    ),
  );
}

function tribunal(court, rounds, corrector) {
  if (!court && !rounds.length) return null;
  const parts = rounds.map((votes, i) =>
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "votes" },
        h("caption", {}, `${t("round")} ${i + 1}`),
        h("thead", {}, h("tr", {}, [t("judge"), t("vote"), t("reason")].map((x) => h("th", { scope: "col" }, x)))),
        h(
          "tbody",
          {},
          votes.map((v) =>
            h(
              "tr",
              { "data-judge": v.judge },
              h("td", {}, v.judge),
              h("td", {}, h("span", { class: `badge vote-${v.vote}` }, v.vote), v.malformed ? ` (${t("malformed")})` : ""),
              h("td", {}, v.reason || "–"),
            ),
          ),
        ),
      ),
    ),
  );
  const corrections = court ? court.corrections : corrector?.rounds || 0;
  parts.push(h("p", { class: "corrections" }, `${t("corrections")}: ${corrections}`));
  for (const reason of corrector?.reasons || []) parts.push(h("p", { class: "muted" }, reason));
  return section(t("why_tribunal"), ...parts);
}

function memories(title, items) {
  if (!items.length) return null;
  return section(
    title,
    h(
      "ul",
      { class: "given" },
      items.map((m) =>
        h(
          "li",
          m.message_id ? { "data-message": m.message_id } : { "data-memory": m.id },
          h("span", { class: "memory-text" }, m.text ?? t("forgotten_item")),
          h("small", { class: "reason" }, ` ${m.reason || ""}${m.score !== undefined && m.score !== null ? ` (${m.score})` : ""}`),
        ),
      ),
    ),
  );
}

export async function openWhy(turnId) {
  const dialog = $("why");
  const body = clear($("why-body"));
  setText($("why-title"), `${t("why_title")} (${turnId})`);
  if (!dialog.open) dialog.showModal();
  let turn;
  let why;
  try {
    [turn, why] = await Promise.all([getJSON(`/api/turns/${turnId}`), getJSON(`/api/turns/${turnId}/why`)]);
  } catch (err) {
    if (err.name !== "AbortError") body.append(h("p", { class: "error" }, err.detail || String(err)));
    return;
  }
  const parts = [];
  if (why.nodes.length) parts.push(h("p", { class: "nodes" }, `${t("nodes")}: ${why.nodes.join(" → ")}`));
  if (why.router) {
    const r = why.router;
    parts.push(h("p", { class: "router" }, `${t("why_router")}: ${r.intent ?? ""} · ${r.tone ?? ""}${r.needs_check ? " · check" : ""}`));
  }
  if (turn.calls.length) parts.push(section(t("why_calls"), ...waterfall(turn.calls, why.call_sent_ms, body.clientWidth), callTable(turn.calls)));
  parts.push(thinker(turn.thinker));
  parts.push(tribunal(turn.tribunal, why.rounds, why.corrector));
  if (turn.salience) {
    parts.push(
      section(
        t("why_salience"),
        h("p", { class: "salience" }, `${t("score")} ${turn.salience.score} · ${turn.salience.stored ? t("stored") : t("not_stored")}`),
      ),
    );
  }
  parts.push(memories(t("why_memories"), why.retrieved));
  parts.push(memories(t("why_recalled"), why.recalled));
  if (turn.followups.length) {
    parts.push(section(t("why_followups"), h("ul", {}, turn.followups.map((f) => h("li", {}, f.reply)))));
  }
  if (!turn.thinker && !turn.tribunal && !why.nodes.length) parts.push(h("p", { class: "muted" }, t("why_none")));
  body.append(...parts.filter(Boolean));
  $("why-close").focus();
}

/** Closes and empties the panel (sign-out, another key signing in). */
export function resetWhy() {
  if ($("why").open) $("why").close();
  clear($("why-body"));
  setText($("why-title"), t("why_title"));
}

export function setupWhy() {
  $("why-close").addEventListener("click", () => $("why").close());
}

// Stats from GET /api/stats as charts drawn here in SVG (no chart library).
import { getJSON } from "./api.js";
import { $, clear, h, ms, s } from "./dom.js";
import { t } from "./i18n.js";
import { errorBanner } from "./ui.js";

const W = 640;
const LABEL = 200;
const ROW = 24;

/** A horizontal bar chart; rows: [{label, values: [number…], text}], series: CSS classes. */
function bars(title, rows, series, max, format, names) {
  const per = series.length;
  const height = rows.length * (ROW * per + 8) + 6;
  const top = Math.max(max, 1e-9);
  const plot = W - LABEL - 90;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${height}`, role: "img", "aria-label": title });
  rows.forEach((r, i) => {
    const y0 = i * (ROW * per + 8) + 4;
    svg.append(s("text", { class: "chart-label", x: LABEL - 8, y: y0 + (ROW * per) / 2 + 4, "text-anchor": "end" }, r.label));
    r.values.forEach((v, j) => {
      const y = y0 + j * ROW;
      const width = Math.max(v > 0 ? 2 : 0, (v / top) * plot);
      svg.append(
        s("rect", { class: `chart-bar ${series[j]}`, x: LABEL, y, width, height: ROW - 6 }, s("title", {}, `${r.label}: ${format(v)}`)),
        s("text", { class: "chart-value", x: LABEL + width + 6, y: y + ROW - 11 }, format(v)),
      );
    });
  });
  // the same figures as a table for screen readers
  const table = h(
    "table",
    { class: "sr-only" },
    h("caption", {}, title),
    h("tbody", {}, rows.map((r) => h("tr", {}, h("th", { scope: "row" }, r.label), r.values.map((v) => h("td", {}, format(v)))))),
  );
  const legend = (names || []).map((name, j) => h("span", { class: `legend ${series[j]}` }, name));
  return h("figure", { class: "figure" }, h("figcaption", {}, title, " ", legend), svg, table);
}

function pct(v) {
  return `${(v * 100).toFixed(1)} %`;
}

export function charts(stats) {
  const calls = stats.calls || [];
  const total = calls.reduce((n, c) => n + c.count, 0);
  const out = [];
  const turns = Object.entries(stats.turns || {});
  const turnCount = turns.reduce((n, [, v]) => n + v, 0);
  out.push(h("p", { class: "turns" }, `${t("stats_turns")}: ${turnCount}${turns.length ? ` (${turns.map(([k, v]) => `${k} ${v}`).join(", ")})` : ""}`));
  if (!total) {
    out.push(h("p", { class: "muted" }, t("stats_empty")));
    return out;
  }
  const outcome = (name) => calls.reduce((n, c) => n + (c.outcomes[name] || 0), 0) / total;
  const rates = [
    { label: t("rate_moved"), values: [outcome("think_split_moved")] },
    { label: t("rate_prose"), values: [outcome("think_split_prose")] },
    { label: t("rate_dropped"), values: [outcome("dropped_tool_call")] },
    { label: t("rate_followup"), values: [(stats.followup_calls?.calls || 0) / total] },
    { label: t("rate_last_resort"), values: [turnCount ? (stats.last_resorts?.count || 0) / turnCount : 0] },
    { label: t("rate_malformed"), values: [outcome("malformed")] },
  ];
  out.push(bars(t("stats_rates"), rates, ["series-a"], Math.max(...rates.map((r) => r.values[0]), 0.05), pct));
  const latency = calls.map((c) => ({ label: `${c.caller} (${c.backend})`, values: [c.p50_ms, c.p95_ms] }));
  out.push(bars(t("stats_latency"), latency, ["series-a", "series-b"], Math.max(...latency.map((r) => r.values[1])), ms, ["p50", "p95"]));
  const judges = Object.entries(stats.corrections || {});
  if (judges.length) {
    const rows = judges.map(([judge, v]) => ({ label: judge, values: [v.corrections] }));
    out.push(bars(t("stats_corrections"), rows, ["series-b"], Math.max(...rows.map((r) => r.values[0]), 1), String));
  }
  return out;
}

export async function loadStats() {
  const body = $("stats-body");
  try {
    const stats = await getJSON(`/api/stats?since=${encodeURIComponent($("stats-since").value)}`);
    clear(body).append(...charts(stats));
  } catch (err) {
    errorBanner(err);
  }
}

/** Forgets the last key's stats. */
export function resetStats() {
  clear($("stats-body"));
  $("stats-form").reset();
}

export function setupStats() {
  $("stats-form").addEventListener("submit", (e) => {
    e.preventDefault();
    loadStats();
  });
}

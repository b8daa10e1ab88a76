// Building DOM nodes. Every text goes in as a text node or textContent: never innerHTML.
const SVG_NS = "http://www.w3.org/2000/svg";

function fill(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "text") el.textContent = String(v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An HTML element: h("p", {class: "x"}, "text", child). */
export function h(tag, props, ...children) {
  return fill(document.createElement(tag), props, children);
}

/** An SVG element, e.g. s("rect", {x: 1, y: 2, width: 3, height: 4}). */
export function s(tag, props, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), props, children);
}

export function $(id) {
  return document.getElementById(id);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export function ms(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
}

export function when(iso, lang) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(lang === "de" ? "de-DE" : "en-GB", {
    dateStyle: "medium",
    timeStyle: "short",
  });
}

/** The CSS class of a call outcome's badge (its colour says the kind). */
export function outcomeClass(outcome) {
  const known = [
    "ok", "error", "timeout", "think_split_moved", "think_split_prose",
    "dropped_tool_call", "empty_answer", "malformed", "truncated",
  ];
  return "badge outcome-" + (known.includes(outcome) ? outcome : "other");
}

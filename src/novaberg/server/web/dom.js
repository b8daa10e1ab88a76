// Building DOM nodes. Every text goes in as a text node or textContent (never innerHTML),
// through visible(): what cannot be seen is shown escaped, as the CLI shows it.
const SVG_NS = "http://www.w3.org/2000/svg";
// novaberg.text.visible: controls (newline and tab kept), format characters (bidi controls,
// zero-width characters), surrogates, line and paragraph separators
const HIDDEN = /[\0-\x08\x0b-\x1f\x7f-\x9f\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u;
const JOINED = /[\p{So}\p{Sk}\u{fe00}-\u{fe0f}\u{e0100}-\u{e01ef}]/u; // a ZWJ after these joins emoji

function escaped(ch) {
  const code = ch.codePointAt(0);
  const [mark, digits] = code < 0x100 ? ["x", 2] : code < 0x10000 ? ["u", 4] : ["U", 8];
  return `\\${mark}${code.toString(16).padStart(digits, "0")}`;
}

/** `value` as text with every hidden character written as its escape ("\u202e"). */
export function visible(value) {
  const text = String(value ?? "");
  if (!HIDDEN.test(text)) return text;
  let out = "";
  let previous = "";
  for (const ch of text.replaceAll("\r\n", "\n")) {
    out += HIDDEN.test(ch) && !(ch === "\u200d" && JOINED.test(previous)) ? escaped(ch) : ch;
    previous = ch;
  }
  return out;
}

/** Sets an element's text (shown as visible() writes it). */
export function setText(el, value) {
  el.textContent = visible(value);
  return el;
}

function fill(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "text") setText(el, v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : visible(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(visible(c)));
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

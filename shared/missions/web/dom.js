// Building the page: elements from data, never HTML from strings (a goal or an answer is text, not markup).

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key === "className" ? "class" : key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** h("button", {type: "button", onclick}, "Approve") */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element: s("rect", {x: 1, y: 2}) */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el, ...children) {
  el.replaceChildren();
  return build(el, {}, children);
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function money(value) {
  return value === null || value === undefined ? "–" : `$${Number(value).toFixed(4)}`;
}

export function percent(value) {
  return value === null || value === undefined ? "–" : `${Math.round(value * 100)}%`;
}

/** A status line for screen readers and eyes: role=status announces politely. */
export function notice(text, kind = "info") {
  return h("p", { className: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/** A small unique id for label/for pairs. */
let counter = 0;
export function uid(prefix = "f") {
  counter += 1;
  return `${prefix}-${counter}`;
}

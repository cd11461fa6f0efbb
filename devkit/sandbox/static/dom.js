// Building DOM nodes without ever parsing markup: every string becomes a text node.

/**
 * Create an element. `attrs` sets attributes (`class`, `data-*`, ...), with `on*` functions
 * as event listeners; children are nodes or strings (turned into text nodes), nested arrays
 * are flattened and null/undefined/false are skipped.
 */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

/** Append children (nodes, strings, arrays of them) to `node`. */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Remove every child of `node`, then append `children`. */
export function replaceChildren(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** A clock time for a Slack ts ("1700000000.000100"). */
export function timeOf(ts) {
  const date = new Date(Math.floor(parseFloat(ts) * 1000));
  return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** POST JSON to the sandbox server and return the decoded answer. */
export async function postJSON(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return response.json();
}

/** GET JSON from the sandbox server. */
export async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// Slack's mrkdwn, rendered minimally and safely: *bold*, _italic_, ~strike~, `code`,
// ```preformatted```, <@U…> mentions, <#C…|name> channels, <url|text> links, line breaks.
// The text is never parsed as HTML: every piece becomes a text node or a plain element.

import { el } from "./dom.js";

const INLINE = new RegExp(
  [
    "<([^<>\\n]+)>",                                      // 1: <@U…>, <#C…|x>, <!here>, <url|text>
    "`([^`\\n]+)`",                                       // 2: code
    "(?<![\\w*])\\*(?!\\s)([^*\\n]+?)(?<!\\s)\\*(?![\\w*])", // 3: bold
    "(?<![\\w_])_(?!\\s)([^_\\n]+?)(?<!\\s)_(?![\\w_])",      // 4: italic
    "(?<![\\w~])~(?!\\s)([^~\\n]+?)(?<!\\s)~(?![\\w~])",      // 5: strike
  ].join("|"),
  "g",
);

/** Decode the three entities Slack escapes in mrkdwn (&amp; last, so "&amp;lt;" stays). */
export function unescapeEntities(text) {
  return text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

/** Render mrkdwn `text` into an array of nodes; `users` maps user ids to names. */
export function mrkdwn(text, users) {
  const nodes = [];
  const parts = String(text).split("```");
  parts.forEach((part, index) => {
    if (index % 2 === 1 && index < parts.length - 1) {
      nodes.push(el("pre", { class: "pre" }, unescapeEntities(part.replace(/^\n/, ""))));
    } else {
      const piece = index % 2 === 1 ? "```" + part : part;
      piece.split("\n").forEach((line, n) => {
        if (n > 0) nodes.push(el("br"));
        nodes.push(...inline(line, users, 0));
      });
    }
  });
  return nodes;
}

function inline(text, users, depth) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) nodes.push(document.createTextNode(unescapeEntities(text.slice(last, match.index))));
    nodes.push(token(match, users, depth));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(unescapeEntities(text.slice(last))));
  return nodes;
}

function token(match, users, depth) {
  const [whole, angle, code, bold, italic, strike] = match;
  if (angle !== undefined) return special(angle, users);
  if (code !== undefined) return el("code", {}, unescapeEntities(code));
  if (depth > 3) return document.createTextNode(unescapeEntities(whole));
  if (bold !== undefined) return el("b", {}, inline(bold, users, depth + 1));
  if (italic !== undefined) return el("i", {}, inline(italic, users, depth + 1));
  return el("s", {}, inline(strike, users, depth + 1));
}

function special(inside, users) {
  const [target, label] = splitLabel(inside);
  if (target.startsWith("@")) {
    const id = target.slice(1);
    return el("span", { class: "mention", "data-user": id }, "@" + (users[id] || label || id));
  }
  if (target.startsWith("#")) return el("span", { class: "mention" }, "#" + (label || target.slice(1)));
  if (target.startsWith("!date^")) return document.createTextNode(unescapeEntities(label));
  if (target.startsWith("!")) {
    return el("span", { class: "mention" }, "@" + (label || target.slice(1).split("^")[0]));
  }
  if (/^(https?:|mailto:)/i.test(target)) {
    return el("a", { href: target, target: "_blank", rel: "noopener noreferrer" },
      unescapeEntities(label || target));
  }
  return document.createTextNode(unescapeEntities(`<${inside}>`));
}

function splitLabel(inside) {
  const bar = inside.indexOf("|");
  return bar < 0 ? [inside, ""] : [inside.slice(0, bar), inside.slice(bar + 1)];
}

/** Render a text object: mrkdwn is parsed, plain_text is shown as it is. */
export function textObject(object, users) {
  if (!object || typeof object.text !== "string") return [];
  if (object.type === "mrkdwn") return mrkdwn(object.text, users);
  return [document.createTextNode(object.text)];
}

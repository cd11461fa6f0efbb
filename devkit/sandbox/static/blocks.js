// Block Kit, drawn with plain DOM nodes: header, section (text, fields, accessory), context,
// divider, actions (buttons with styles and confirm dialogs), rich_text, image, input.

import { el } from "./dom.js";
import { textObject } from "./mrkdwn.js";

/**
 * Render `blocks`. `ctx` carries `users` (id -> name), `onButton(element, blockId)` for
 * clicks, `errors` (block_id -> message, for modals) and `confirm(dialog)` (a Promise of a
 * yes/no answer, for buttons with a confirm object).
 */
export function renderBlocks(blocks, ctx) {
  return el("div", { class: "blocks" }, (blocks || []).map((block, index) => {
    const blockId = block.block_id || `b${index}`;
    const node = renderBlock(block, blockId, ctx);
    node.dataset.blockId = blockId;
    node.dataset.blockType = block.type || "";
    return node;
  }));
}

function renderBlock(block, blockId, ctx) {
  switch (block.type) {
    case "header":
      return el("div", { class: "b-header" }, textObject(block.text, ctx.users));
    case "section":
      return section(block, blockId, ctx);
    case "context":
      return el("div", { class: "b-context" }, (block.elements || []).map((item) =>
        item.type === "image" ? image(item, "ctx-image") : el("span", {}, textObject(item, ctx.users))));
    case "divider":
      return el("hr", { class: "b-divider" });
    case "actions":
      return el("div", { class: "b-actions" },
        (block.elements || []).map((element) => interactive(element, blockId, ctx)));
    case "rich_text":
      return el("div", { class: "b-rich" }, (block.elements || []).map((item) => richElement(item, ctx)));
    case "image":
      return el("figure", { class: "b-image" }, image(block, "image"),
        block.title ? el("figcaption", {}, textObject(block.title, ctx.users)) : null);
    case "input":
      return input(block, blockId, ctx);
    case "markdown":
      return el("div", { class: "b-section" }, el("div", { class: "b-text" }, String(block.text || "")));
    default:
      return el("div", { class: "b-unsupported" }, `[${block.type} block]`);
  }
}

function section(block, blockId, ctx) {
  const body = el("div", { class: "b-section-body" },
    block.text ? el("div", { class: "b-text" }, textObject(block.text, ctx.users)) : null,
    block.fields ? el("div", { class: "b-fields" },
      block.fields.map((field) => el("div", { class: "b-field" }, textObject(field, ctx.users)))) : null);
  const accessory = block.accessory ? el("div", { class: "b-accessory" },
    block.accessory.type === "image" ? image(block.accessory, "accessory-image")
      : interactive(block.accessory, blockId, ctx)) : null;
  return el("div", { class: "b-section" }, body, accessory);
}

function image(item, cls) {
  const url = String(item.image_url || "");
  if (url.startsWith("data:image/") || url.startsWith("/")) {
    return el("img", { class: cls, src: url, alt: item.alt_text || "" });
  }
  return el("span", { class: `${cls} image-placeholder`, title: url }, `🖼 ${item.alt_text || "image"}`);
}

function interactive(element, blockId, ctx) {
  if (element.type !== "button") {
    return el("span", { class: "b-unsupported" }, `[${element.type}]`);
  }
  const classes = ["btn", element.style ? `btn-${element.style}` : "btn-default"].join(" ");
  const button = el("button", {
    type: "button", class: classes, "data-action-id": element.action_id || "",
    "data-block-id": blockId, "data-value": element.value || "",
  }, textObject(element.text, ctx.users));
  button.addEventListener("click", async () => {
    if (element.confirm && !(await ctx.confirm(element.confirm))) return;
    if (element.url) window.open(element.url, "_blank", "noopener");
    button.disabled = true;
    try {
      await ctx.onButton(element, blockId);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

function richElement(item, ctx) {
  switch (item.type) {
    case "rich_text_preformatted":
      return el("pre", { class: "pre" }, richInline(item.elements, ctx));
    case "rich_text_quote":
      return el("blockquote", {}, richInline(item.elements, ctx));
    case "rich_text_list":
      return el(item.style === "ordered" ? "ol" : "ul", {},
        (item.elements || []).map((sub) => el("li", {}, richInline(sub.elements, ctx))));
    default:
      return el("div", {}, richInline(item.elements, ctx));
  }
}

function richInline(elements, ctx) {
  return (elements || []).map((part) => {
    let node;
    if (part.type === "user") node = el("span", { class: "mention" }, "@" + (ctx.users[part.user_id] || part.user_id));
    else if (part.type === "channel") node = el("span", { class: "mention" }, "#" + part.channel_id);
    else if (part.type === "link") node = el("a", { href: /^https?:/i.test(part.url) ? part.url : "#", target: "_blank", rel: "noopener noreferrer" }, part.text || part.url);
    else if (part.type === "emoji") node = document.createTextNode(part.unicode ? String.fromCodePoint(parseInt(part.unicode, 16)) : `:${part.name}:`);
    else node = document.createTextNode(String(part.text || ""));
    const style = part.style || {};
    if (style.code) node = el("code", {}, node);
    if (style.bold) node = el("b", {}, node);
    if (style.italic) node = el("i", {}, node);
    if (style.strike) node = el("s", {}, node);
    return node;
  });
}

function input(block, blockId, ctx) {
  const element = block.element || {};
  const fieldId = `input-${blockId}`;
  const attrs = {
    id: fieldId, class: "field", "data-block-id": blockId, "data-action-id": element.action_id || "",
    placeholder: element.placeholder ? element.placeholder.text : null,
    maxlength: element.max_length || null,
  };
  let field;
  if (["plain_text_input", "email_text_input", "url_text_input", "number_input"].includes(element.type)) {
    field = element.multiline ? el("textarea", { ...attrs, rows: 6 }) : el("input", { ...attrs, type: "text" });
    field.value = element.initial_value !== undefined ? String(element.initial_value) : "";
  } else {
    field = el("div", { class: "b-unsupported" }, `[${element.type} input]`);
  }
  const error = (ctx.errors || {})[blockId];
  return el("div", { class: error ? "b-input has-error" : "b-input" },
    el("label", { for: fieldId }, textObject(block.label, ctx.users), block.optional ? el("span", { class: "optional" }, " (optional)") : null),
    field,
    block.hint ? el("div", { class: "hint" }, textObject(block.hint, ctx.users)) : null,
    error ? el("div", { class: "field-error", role: "alert" }, String(error)) : null);
}

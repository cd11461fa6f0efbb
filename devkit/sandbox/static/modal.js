// Modals (views.open) and confirm dialogs. A modal is drawn once per view id and hash, so
// what the person typed survives the page's refreshes; validation errors are put in place.

import { el, replaceChildren } from "./dom.js";
import { renderBlocks } from "./blocks.js";
import { textObject } from "./mrkdwn.js";

/** The modal layer: shows the acting person's open modal, submits and closes it. */
export class ModalLayer {
  constructor(root, actions) {
    this.root = root;
    this.actions = actions; // { submit(viewId, values), close(viewId), users() }
    this.key = null;
  }

  /** Show `modal` ({id, view}) or nothing; redraw only when the view itself changed. */
  sync(modal) {
    const key = modal ? `${modal.id}:${modal.view.hash || ""}` : null;
    if (key === this.key) return;
    this.key = key;
    if (!modal) {
      replaceChildren(this.root);
      this.root.hidden = true;
      return;
    }
    this.draw(modal);
  }

  draw(modal) {
    const view = modal.view;
    const users = this.actions.users();
    const body = renderBlocks(view.blocks, { users, errors: {}, confirm: confirmDialog,
      onButton: async () => {} });
    const banner = el("div", { class: "modal-error", role: "alert", hidden: true });
    const submit = view.submit ? el("button", { type: "submit", class: "btn btn-primary", id: "modal-submit" },
      textObject(view.submit, users)) : null;
    const close = el("button", { type: "button", class: "btn btn-default", id: "modal-close",
      onclick: () => this.actions.close(modal.id) }, view.close ? textObject(view.close, users) : "Close");
    const form = el("form", { class: "modal", role: "dialog", "aria-modal": "true", "data-view-id": modal.id,
      "data-callback-id": view.callback_id || "" },
      el("header", { class: "modal-head" }, el("h2", {}, textObject(view.title, users)),
        el("button", { type: "button", class: "modal-x", "aria-label": "Close",
          onclick: () => this.actions.close(modal.id) }, "×")),
      el("div", { class: "modal-body" }, banner, body),
      el("footer", { class: "modal-foot" }, close, submit));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (submit) submit.disabled = true;
      try {
        const answer = await this.actions.submit(modal.id, collectValues(form));
        showErrors(form, answer.errors || {});
        banner.hidden = !answer.error;
        banner.textContent = answer.error || "";
      } finally {
        if (submit) submit.disabled = false;
      }
    });
    replaceChildren(this.root, el("div", { class: "overlay" }, form));
    this.root.hidden = false;
    const first = form.querySelector(".field");
    if (first) first.focus();
  }
}

/** What the person typed: block_id -> action_id -> text. */
export function collectValues(root) {
  const values = {};
  for (const field of root.querySelectorAll(".field")) {
    const block = field.dataset.blockId;
    values[block] = values[block] || {};
    values[block][field.dataset.actionId] = field.value;
  }
  return values;
}

/** Put `errors` (block_id -> message) under their inputs; clear the others. */
export function showErrors(root, errors) {
  for (const wrapper of root.querySelectorAll(".b-input")) {
    const field = wrapper.querySelector(".field");
    const message = field ? errors[field.dataset.blockId] : undefined;
    wrapper.querySelector(".field-error")?.remove();
    wrapper.classList.toggle("has-error", Boolean(message));
    if (message) wrapper.append(el("div", { class: "field-error", role: "alert" }, String(message)));
  }
}

/** Slack's confirm dialog for a button: resolves true on confirm, false on deny. */
export function confirmDialog(confirm) {
  return new Promise((resolve) => {
    const layer = document.getElementById("confirm-root");
    const done = (answer) => {
      replaceChildren(layer);
      layer.hidden = true;
      resolve(answer);
    };
    const style = confirm.style === "danger" ? "btn-danger" : "btn-primary";
    replaceChildren(layer, el("div", { class: "overlay" },
      el("div", { class: "modal confirm", role: "alertdialog", "aria-modal": "true" },
        el("header", { class: "modal-head" }, el("h2", {}, textObject(confirm.title, {}))),
        el("div", { class: "modal-body" }, textObject(confirm.text, {})),
        el("footer", { class: "modal-foot" },
          el("button", { type: "button", class: "btn btn-default", id: "confirm-no", onclick: () => done(false) },
            confirm.deny ? confirm.deny.text : "Cancel"),
          el("button", { type: "button", class: `btn ${style}`, id: "confirm-yes", onclick: () => done(true) },
            confirm.confirm ? confirm.confirm.text : "Yes")))));
    layer.hidden = false;
  });
}

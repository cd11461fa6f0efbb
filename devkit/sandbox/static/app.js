// The sandbox page: a Slack channel with threads, modals and ephemeral messages, acting as
// one of a few people. Every action goes to the sandbox server, which sends it to the app
// as Slack would; the page redraws when the workspace changes (long poll on its events).

import { el, getJSON, postJSON, replaceChildren, timeOf } from "./dom.js";
import { mrkdwn } from "./mrkdwn.js";
import { renderBlocks } from "./blocks.js";
import { ModalLayer, confirmDialog } from "./modal.js";
import { DevPanel } from "./panel.js";

const app = { boot: null, user: null, channel: null, thread: null, home: false, state: null, busy: false, again: false };
const $ = (id) => document.getElementById(id);
let modal;

async function main() {
  app.boot = await getJSON("/ui/bootstrap");
  document.title = app.boot.title;
  $("team-name").textContent = app.boot.title;
  const wanted = new URLSearchParams(location.search).get("as");
  app.user = (app.boot.personas.find((p) => p.id === wanted) || app.boot.personas[0]).id;
  const select = $("persona");
  for (const p of app.boot.personas) {
    select.append(el("option", { value: p.id }, `${p.real_name} — ${p.role}`));
  }
  select.value = app.user;
  select.addEventListener("change", () => {
    app.user = select.value;
    if (app.home) openHome(); else refresh();
  });
  $("composer").addEventListener("submit", send);
  $("thread-close").addEventListener("click", () => {
    app.thread = null;
    refresh();
  });
  modal = new ModalLayer($("modal-root"), {
    submit: (viewId, values) => postJSON("/ui/submit", { user: app.user, view_id: viewId, values })
      .then((answer) => { refresh(); return answer; }),
    close: (viewId) => postJSON("/ui/close", { user: app.user, view_id: viewId }).then(refresh),
    users: () => (app.state ? app.state.users : app.boot.users),
  });
  if (app.boot.panel) {
    new DevPanel($("devpanel"), { runId: currentRunId, toast }).start();
  }
  await refresh();
  poll();
}

async function poll() {
  let since = 0;
  for (;;) {
    try {
      const answer = await getJSON(`/ui/events?since=${since}&timeout=20`);
      since = answer.seq;
      if (answer.changed) refresh();
    } catch (error) {
      $("connection").hidden = false;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      continue;
    }
    $("connection").hidden = true;
  }
}

async function refresh() {
  if (app.busy) {
    app.again = true;
    return;
  }
  app.busy = true;
  try {
    do {
      app.again = false;
      const asked = { user: app.user, channel: app.channel || "", thread: app.thread || "" };
      const state = await getJSON(`/ui/state?${new URLSearchParams(asked)}`);
      if (app.user !== asked.user || (app.channel || "") !== asked.channel
          || (app.thread || "") !== asked.thread) {
        app.again = true; // the person moved on while this was loading: ask again
        continue;
      }
      app.state = state;
      app.channel = state.channel;
      if (!state.thread) app.thread = null;
      draw(state);
    } while (app.again);
  } catch (error) {
    toast(`Could not load the workspace: ${error.message}`);
  } finally {
    app.busy = false;
  }
}

function draw(state) {
  document.body.dataset.user = state.user;
  const home = el("li", {}, el("button", { type: "button", class: app.home ? "chan active" : "chan",
    "data-home": "1", onclick: openHome }, `🏠 ${app.boot.bot.name} Home`));
  replaceChildren($("channels"), [home, ...state.channels.map((c) => el("li", {},
    el("button", { type: "button", class: !app.home && c.id === state.channel ? "chan active" : "chan", "data-channel": c.id,
      onclick: () => { app.home = false; app.channel = c.id; app.thread = null; refresh(); } },
    c.is_im ? `✉ ${app.boot.bot.name}` : `# ${c.name}`)))]);
  $("composer").hidden = app.home;
  if (app.home) {
    drawHome(state);
    return;
  }
  const current = state.channels.find((c) => c.id === state.channel);
  $("channel-name").textContent = current ? (current.is_im ? `${app.boot.bot.name} (direct messages)` : `# ${current.name}`) : "";
  $("composer-input").placeholder = current ? `Message ${current.is_im ? app.boot.bot.name : "#" + current.name} — try /agent refund order 1042 and email the customer` : "";
  keepScroll($("messages"), () => replaceChildren($("messages"), state.messages.map((m) => messageNode(m, "channel"))));
  const pane = $("thread");
  pane.hidden = !state.thread;
  document.body.classList.toggle("thread-open", Boolean(state.thread));
  if (state.thread) {
    keepScroll($("thread-messages"), () => replaceChildren($("thread-messages"),
      messageNode(state.thread.parent, "parent"),
      el("div", { class: "thread-divider" }, `${state.thread.replies.filter((r) => !r.ephemeral).length} replies`),
      state.thread.replies.map((m) => messageNode(m, "reply")),
      state.thread.status ? el("div", { class: "thread-status", id: "thread-status" },
        `${app.boot.bot.name} ${state.thread.status}`) : null));
  }
  modal.sync(state.modal);
}

function drawHome(state) {
  $("channel-name").textContent = `${app.boot.bot.name} — Home`;
  $("thread").hidden = true;
  document.body.classList.remove("thread-open");
  const content = state.home
    ? renderBlocks(state.home.blocks, { users: state.users, confirm: confirmDialog,
      onButton: (element, blockId) => clickHome(element, blockId) })
    : el("div", { class: "muted" }, "Opening the Home tab…");
  replaceChildren($("messages"), el("section", { class: "home", "data-home": "1" }, content));
  modal.sync(state.modal);
}

async function openHome() {
  // Slack tells the app the tab was opened; the app publishes it (views.publish)
  app.home = true;
  app.thread = null;
  const answer = await postJSON("/ui/home", { user: app.user });
  if (!answer.ok) toast(`The app did not acknowledge opening Home (${answer.error || "error"}).`);
  refresh();
}

async function clickHome(element, blockId) {
  const answer = await postJSON("/ui/click", { user: app.user, home: true,
    action_id: element.action_id, block_id: blockId });
  if (!answer.ok) toast(`The app did not acknowledge the click (${answer.error || "error"}).`);
  refresh();
}

function messageNode(m, where) {
  const users = app.state.users;
  const author = m.is_bot ? app.boot.bot.name : m.author;
  const content = m.blocks && m.blocks.length
    ? renderBlocks(m.blocks, { users, confirm: confirmDialog, onButton: (element, blockId) => click(m, element, blockId) })
    : el("div", { class: "text" }, mrkdwn(m.text, users));
  const classes = ["msg", m.ephemeral ? "ephemeral" : "", m.is_bot ? "from-bot" : ""].join(" ").trim();
  return el("article", { class: classes, "data-ts": m.ts, "data-where": where },
    el("div", { class: "avatar", "aria-hidden": "true" }, (author || "?").slice(0, 1).toUpperCase()),
    el("div", { class: "msg-body" },
      el("div", { class: "meta" }, el("span", { class: "author" }, author),
        m.is_bot ? el("span", { class: "app-tag" }, "APP") : null,
        el("time", {}, timeOf(m.ts)), m.edited ? el("span", { class: "muted" }, " (edited)") : null),
      content,
      m.ephemeral ? el("div", { class: "only-you" }, "👁 Only visible to you") : null,
      where === "channel" && m.reply_count ? el("button", { type: "button", class: "replies-link",
        onclick: () => { app.thread = m.ts; refresh(); } }, `${m.reply_count} ${m.reply_count === 1 ? "reply" : "replies"}`) : null));
}

async function click(m, element, blockId) {
  // An ephemeral message is only ever shown to its person: the page acts as them.
  const answer = await postJSON("/ui/click", { user: app.user, channel: m.channel, ts: m.ts,
    action_id: element.action_id, block_id: blockId, ephemeral: Boolean(m.ephemeral) });
  if (!answer.ok) {
    const status = answer.status ? `HTTP ${answer.status}` : "no answer";
    toast(`The app did not acknowledge the click (${answer.error || "error"}, ${status}).`);
  }
  refresh();
}

async function send(event) {
  event.preventDefault();
  const input = $("composer-input");
  const text = input.value.trim();
  if (!text || !app.channel) return;
  input.value = "";
  const path = text.startsWith("/") ? "/ui/command" : "/ui/message";
  const answer = await postJSON(path, { user: app.user, channel: app.channel, text });
  if (!answer.ok && path === "/ui/message") toast(`Not sent: ${answer.error}`);
  refresh();
}

function currentRunId() {
  const parent = app.state && app.state.thread ? app.state.thread.parent : null;
  for (const block of (parent && parent.blocks) || []) {
    if (typeof block.block_id === "string" && block.block_id.startsWith("run:")) return block.block_id.slice(4);
  }
  return "";
}

function keepScroll(box, redraw) {
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const top = box.scrollTop;
  redraw();
  box.scrollTop = atBottom ? box.scrollHeight : top;
}

function toast(text) {
  const box = $("toast");
  box.textContent = text;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 4000);
}

main();

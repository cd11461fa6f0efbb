// The dev panel of `signoff dev`: the worker child, the run's journal, the provider's ledger,
// and the "Crash the worker" button.

import { el, getJSON, postJSON, replaceChildren } from "./dom.js";

export class DevPanel {
  constructor(root, { runId, toast }) {
    this.root = root;
    this.runId = runId;
    this.toast = toast;
    this.workerLine = el("div", { id: "worker-status", class: "worker-status" }, "…");
    this.holdLine = el("div", { id: "hold-status", class: "hold-status" });
    this.runLine = el("div", { id: "run-status", class: "run-status" }, "No run yet.");
    this.journal = el("tbody", { id: "journal" });
    this.ledgerLine = el("div", { id: "ledger-summary", class: "ledger-summary" }, "");
    this.ledger = el("tbody", { id: "ledger" });
    const crash = el("button", { type: "button", id: "crash-worker", class: "btn btn-danger",
      title: "SIGKILL the worker process now; it restarts by itself",
      onclick: () => this.crash() }, "Crash the worker");
    const hold = el("button", { type: "button", id: "hold-refund", class: "btn btn-default",
      title: "The provider commits the next new refund, then holds its answer, so a crash lands between the charge and the journal",
      onclick: () => this.hold() }, "Hold the next refund");
    replaceChildren(root,
      el("section", { class: "panel-section" }, el("h2", {}, "Worker"), this.workerLine,
        el("div", { class: "panel-buttons" }, crash, hold), this.holdLine),
      el("section", { class: "panel-section" }, el("h2", {}, "Run journal"), this.runLine,
        el("table", { class: "grid journal" }, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "kind"),
          el("th", {}, "name"), el("th", {}, "output"))), this.journal)),
      el("section", { class: "panel-section" }, el("h2", {}, "Payment provider ledger"), this.ledgerLine,
        el("table", { class: "grid ledger" }, el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "request"),
          el("th", {}, "idempotency key"), el("th", {}, "status"), el("th", {}, "charge"))), this.ledger)));
    root.hidden = false;
  }

  start() {
    this.refresh();
    setInterval(() => this.refresh(), 1000);
  }

  async refresh() {
    if (this.busy) return;
    this.busy = true;
    try {
      const run = this.runId() || "";
      this.draw(await getJSON(`/ui/panel?run=${encodeURIComponent(run)}`));
    } catch (error) {
      replaceChildren(this.workerLine, "sandbox server unreachable");
    } finally {
      this.busy = false;
    }
  }

  async crash() {
    const answer = await postJSON("/ui/panel/crash", {});
    this.toast(answer.ok ? `Killed the worker (pid ${answer.killed}, SIGKILL); it restarts by itself.`
      : "No worker was running.");
    this.refresh();
  }

  async hold() {
    await postJSON("/ui/panel/hold", {});
    this.toast("The provider will hold its answer to the next new refund.");
    this.refresh();
  }

  draw(data) {
    const w = data.worker;
    this.workerLine.dataset.pid = w.pid || "";
    this.workerLine.dataset.restarts = w.restarts;
    replaceChildren(this.workerLine,
      el("span", { class: w.alive ? "dot on" : "dot off" }), w.alive ? ` running · pid ${w.pid}` : " restarting…",
      ` · restarts ${w.restarts}`);
    const hold = data.hold || {};
    replaceChildren(this.holdLine, hold.holding ? "⏸ The provider has charged a refund and holds its answer: crash the worker now."
      : hold.armed ? "The next new refund will be held after it is charged." : "");
    this.drawRun(data.run, data.journal || []);
    this.ledgerLine.dataset.charges = data.charges;
    replaceChildren(this.ledgerLine, `${data.ledger_total} requests · `,
      el("b", { id: "charges-count" }, `${data.charges} charge${data.charges === 1 ? "" : "s"}`));
    replaceChildren(this.ledger, data.ledger.map((entry) => el("tr", { class: entry.charge ? "charge" : "" },
      el("td", {}, entry.seq), el("td", { class: "mono" }, `${entry.method} ${entry.path}`),
      el("td", { class: "mono key", title: entry.idempotency_key || "" }, short(entry.idempotency_key)),
      el("td", {}, entry.status), el("td", {}, entry.charge ? "yes" : "—"))));
  }

  drawRun(run, journal) {
    if (!run) {
      replaceChildren(this.runLine, "No run yet.");
      replaceChildren(this.journal);
      return;
    }
    this.runLine.dataset.status = run.status;
    this.runLine.dataset.runId = run.id;
    replaceChildren(this.runLine, el("span", { class: `badge ${run.status}` }, run.status), " ",
      el("code", { title: run.id }, run.id.slice(0, 8)), " ", run.task,
      run.wait_key ? el("span", { class: "muted" }, ` · waiting for ${run.wait_key}`) : null);
    replaceChildren(this.journal, journal.map((step) => el("tr", { class: step.error ? "failed" : "" },
      el("td", {}, step.position), el("td", {}, step.kind), el("td", { class: "mono" }, step.name),
      el("td", { class: "mono out", title: step.error || step.output || "" }, step.error || step.output || ""))));
  }
}

function short(key) {
  if (!key) return "—";
  return key.length > 14 ? `${key.slice(0, 6)}…${key.slice(-6)}` : key;
}

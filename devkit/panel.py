"""The side panel of ``signoff dev``: the provider's ledger, a run's journal, the worker.

It reads the demo payment provider's ledger and the run's journal (through the runtime, from
the database the worker writes), and offers two buttons: "Crash the worker" (SIGKILL the
worker child at once; it is restarted) and "Hold the next refund" (the provider commits the
next new refund, then holds its HTTP response, so a crash lands between the charge and the
journal entry that would record it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agent_runtime import AgentInput, Run, RunNotFound, Runtime, parse_run_id
from devkit.demo.ledger import Ledger
from devkit.demo.records import LedgerEntry
from devkit.worker_supervisor import WorkerSupervisor

LEDGER_SHOWN = 40
OUTPUT_CHARS = 160


class DevPanel:
    """Implements ``devkit.sandbox.ui_api.Panel`` for ``signoff dev``."""

    def __init__(
        self,
        runtime: Runtime,
        ledger: Ledger,
        worker: WorkerSupervisor,
        *,
        hold_file: Path | None = None,
    ) -> None:
        self._runtime = runtime
        self._ledger = ledger
        self._worker = worker
        self._hold_file = hold_file

    def state(self, params: Mapping[str, str]) -> dict[str, Any]:
        """Return the worker's status, the ledger, and the journal of the chosen run.

        ``run`` chooses the run (the page sends the one whose thread is open); without it,
        or if it names no run, the latest run is shown.
        """
        entries = self._ledger.entries()
        run = self._run(params.get("run", ""))
        return {
            "worker": asdict(self._worker.status()),
            "ledger": [_entry_json(e) for e in entries[-LEDGER_SHOWN:]],
            "ledger_total": len(entries),
            "charges": sum(1 for e in entries if e.created_charge),
            "hold": self._hold_state(),
            "run": None if run is None else _run_json(run),
            "journal": [] if run is None else self._journal(run),
        }

    def act(self, action: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``crash``: SIGKILL the worker now; ``hold``: hold the next new refund's response."""
        if action == "crash":
            pid = self._worker.kill()
            self._release_hold()
            return {"ok": pid is not None, "killed": pid}
        if action == "hold" and self._hold_file is not None:
            Path(f"{self._hold_file}.arm").write_text("armed\n")
            return {"ok": True}
        return {"ok": False, "error": "unknown_action"}

    def _run(self, wanted: str) -> Run | None:
        if wanted:
            try:
                return self._runtime.get(parse_run_id(wanted))
            except (ValueError, RunNotFound):
                pass
        latest = self._runtime.runs(limit=1)
        return latest[0] if latest else None

    def _journal(self, run: Run) -> list[dict[str, Any]]:
        return [
            {
                "position": step.position,
                "kind": step.kind.value,
                "name": step.name,
                "attempts": step.attempts,
                "output": _short(step.output) if step.error is None else None,
                "error": None if step.error is None else _clip(step.error.message),
            }
            for step in self._runtime.journal(run.id)
        ]

    def _hold_state(self) -> dict[str, Any]:
        if self._hold_file is None:
            return {"available": False, "armed": False, "holding": False}
        return {
            "available": True,
            "armed": Path(f"{self._hold_file}.arm").exists(),
            "holding": self._hold_file.exists(),
        }

    def _release_hold(self) -> None:
        if self._hold_file is not None:
            self._hold_file.unlink(missing_ok=True)


def _run_json(run: Run) -> dict[str, Any]:
    data = AgentInput.of(run.input)
    task = "" if data is None else data.task
    return {
        "id": run.id,
        "workflow": run.workflow,
        "status": run.status.value,
        "task": _clip(str(task)),
        "wait_key": run.wait_key,
        "lease_owner": run.lease_owner,
    }


def _entry_json(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "at": entry.at,
        "method": entry.method,
        "path": entry.path,
        "idempotency_key": entry.idempotency_key,
        "status": entry.status,
        "charge": entry.created_charge,
        "charge_id": entry.charge_id,
    }


def _short(value: Any) -> str:
    return _clip(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"

"""``signoff runs`` and ``signoff approvals`` page with ``--after``: the last item shown."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_runtime.ids import RunId, new_run_id
from store import open_store
from tests.integration import cli_ok, run_cli, signoff_env

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _runs(db: Path, count: int) -> list[RunId]:
    """Store ``count`` runs a minute apart; return their ids, newest first."""
    store = open_store(f"sqlite:///{db}")
    try:
        ids = [
            store.create_run(new_run_id(), "demo.steps", {}, T0 + timedelta(minutes=m)).id
            for m in range(count)
        ]
    finally:
        store.engine.dispose()
    return ids[::-1]


def test_runs_page_after_the_last_run_shown(tmp_path: Path) -> None:
    """Pages of two, each after the last run of the one before, list every run once."""
    db = tmp_path / "signoff.db"
    newest_first = _runs(db, 5)
    env = signoff_env(f"sqlite:///{db}")
    shown: list[str] = []
    after: list[str] = []
    for _ in range(3):
        page = json.loads(cli_ok(env, "runs", "--limit", "2", *after, "--json"))
        shown += [run["id"] for run in page]
        after = ["--after", shown[-1]]
    assert shown == newest_first


def test_a_page_after_an_unknown_item_is_a_one_line_error(tmp_path: Path) -> None:
    """``--after`` naming no run, or no approval, is refused in one line."""
    db = tmp_path / "signoff.db"
    _runs(db, 1)
    env = signoff_env(f"sqlite:///{db}")
    for args in (["runs", "--after", "0" * 32], ["approvals", "--after", "a_missing"]):
        done = run_cli(env, *args)
        assert done.returncode == 2, done
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr

"""The audit log's chains per shard of runs: placement, and what verification catches.

Logs are written by the in-memory approvals store (the same chaining as the SQL store) and
then tampered with as lists; the database versions of these attacks, through SQL and
``signoff audit verify``, are in tests/integration/test_audit_shards.py.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from agent_runtime.audit import AUDIT_SHARDS, GENESIS, AuditDraft, AuditEntry, genesis, shard_of
from agent_runtime.audit_anchors import Anchor, anchor_of
from agent_runtime.audit_keys import AuditKey, AuditKeys
from agent_runtime.audit_report import examine
from agent_runtime.memory_approvals import InMemoryApprovalStore
from agent_runtime.memory_store import InMemoryStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEYS = AuditKeys((AuditKey("k1", b"k" * 32),))
RUNS = ("run", "r1", "x", "b")
"""Runs in shards 0, 1, 3 and 9."""

Log = tuple[list[AuditEntry], dict[int, tuple[int, str]]]


def written(per_run: int = 3) -> tuple[InMemoryApprovalStore, Log]:
    """A signed log of ``per_run`` entries for each of ``RUNS``, appended round-robin."""
    store = InMemoryApprovalStore(InMemoryStore(), KEYS)
    for n in range(per_run):
        for run_id in RUNS:
            store.append_audit(
                AuditDraft(
                    at=T0 + timedelta(seconds=n),
                    approval_id=f"ap-{run_id}",
                    run_id=run_id,
                    action="approve",
                    actor={"user_id": "U_DANA"},
                )
            )
    return store, store.audit_log()


def problems(log: Log, *anchors: Anchor) -> list[str]:
    """What verification with the key (and ``anchors``) reports."""
    entries, heads = log
    lines = [a.to_line() for a in anchors]
    return examine(entries, heads, keys=KEYS, anchor_lines=lines).problems


def test_a_runs_entries_share_one_chain_and_shards_are_stable() -> None:
    """Every entry of a run is in the run's shard, numbered from 1; the shard of an id is
    the same in every process (CRC-32), and shard 0 starts from the old single chain's
    genesis."""
    assert [shard_of(r) for r in RUNS] == [0, 1, 3, 9]
    assert genesis(0) == GENESIS
    assert len({genesis(s) for s in range(AUDIT_SHARDS)}) == 16
    _, (entries, heads) = written()
    for run_id in RUNS:
        chain = [e for e in entries if e.run_id == run_id]
        assert {e.shard for e in chain} == {shard_of(run_id)}
        assert [e.seq for e in chain] == [1, 2, 3]
        assert chain[0].prev_hash == genesis(shard_of(run_id))
    assert len(heads) == AUDIT_SHARDS
    report = examine(entries, heads, keys=KEYS)
    assert report.ok
    assert report.entries == 12
    assert [(c.shard, c.entries) for c in report.chains if c.entries] == [
        (0, 3),
        (1, 3),
        (3, 3),
        (9, 3),
    ]


def test_an_entry_moved_to_another_shard_is_caught() -> None:
    """An entry taken out of shard 1 and put at the end of shard 3, head and all, breaks
    both chains."""
    _, (entries, heads) = written()
    moved = next(e for e in entries if e.shard == 1 and e.seq == 3)
    kept = [e for e in entries if e is not moved]
    forged = [*kept, dataclasses.replace(moved, shard=3, seq=4)]
    second = next(e for e in entries if e.shard == 1 and e.seq == 2)
    found = problems((forged, heads | {1: (2, second.hash), 3: (4, moved.hash)}))
    assert found[:2] == [
        "shard 3: entry 4 does not follow the entry before it",
        "shard 3: entry 4 was altered after it was written",
    ]


def test_whole_chains_swapped_between_shards_are_caught() -> None:
    """Shards 1 and 3 relabelled with their heads: each chain's first entry no longer
    follows its shard's genesis."""
    _, (entries, heads) = written()
    swap = {1: 3, 3: 1}
    forged = [dataclasses.replace(e, shard=swap.get(e.shard, e.shard)) for e in entries]
    found = problems((forged, heads | {1: heads[3], 3: heads[1]}))
    assert "shard 1: entry 1 does not follow the entry before it" in found
    assert "shard 3: entry 1 does not follow the entry before it" in found


def test_a_missing_head_row_and_a_stray_shard_are_caught() -> None:
    """A shard's head row deleted, or an entry in a shard the log does not have: reported."""
    _, (entries, heads) = written()
    without = {s: h for s, h in heads.items() if s != 9}
    assert problems((entries, without)) == [
        "shard 9: its head row is missing (the log was truncated)"
    ]
    stray = [*entries, dataclasses.replace(entries[0], shard=AUDIT_SHARDS)]
    assert problems((stray, heads)) == [f"shard 16 is not one of the log's {AUDIT_SHARDS} shards"]


def test_a_truncated_shard_and_its_newest_entry_removed_are_caught_by_the_anchor() -> None:
    """Shard 3 emptied with its head reset, and shard 9's newest entry removed with its head
    moved back: both chains are sound, only the anchor taken before tells."""
    store, (entries, heads) = written()
    anchor = anchor_of(store.newest_audit_entries(), T0)
    assert [h.shard for h in anchor.heads] == [0, 1, 3, 9]
    assert problems((entries, heads), anchor) == []
    cut = [e for e in entries if e.shard != 3 and not (e.shard == 9 and e.seq == 3)]
    second = next(e for e in entries if e.shard == 9 and e.seq == 2)
    heads = heads | {3: (0, genesis(3)), 9: (2, second.hash)}
    assert problems((cut, heads)) == []
    assert problems((cut, heads), anchor) == [
        "shard 3: anchor line 1: entry 3 is missing from the log (deleted, or the log truncated)",
        "shard 9: anchor line 1: entry 3 is missing from the log (deleted, or the log truncated)",
    ]


def test_an_anchor_line_from_before_shards_anchors_shard_0() -> None:
    """A line written by the single-chain version (seq, hash, at, kid, mac) is shard 0's head."""
    store, log = written()
    newest = store.newest_audit_entries()[0]
    line = (
        f'{{"at": "{T0.isoformat()}", "hash": "{newest.hash}", "kid": "k1", '
        f'"mac": "{newest.mac}", "seq": 3}}'
    )
    anchor = Anchor.from_line(line)
    assert [(h.shard, h.seq) for h in anchor.heads] == [(0, 3)]
    assert problems(log, anchor) == []
    report = examine(*log, keys=KEYS, anchor_lines=[line.replace(newest.hash, "f" * 64)])
    assert report.problems[-1] == (
        "shard 0: anchor line 1: its MAC does not verify (the anchor file was edited)"
    )

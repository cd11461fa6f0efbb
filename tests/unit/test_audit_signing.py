"""Signed audit entries, the rule for entries written before signing, anchors and key settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_runtime.audit import AUDIT_SHARDS, GENESIS, AuditDraft, AuditEntry, chain, genesis
from agent_runtime.audit_anchors import anchor_of
from agent_runtime.audit_keys import AuditKey, AuditKeys
from agent_runtime.audit_report import examine
from bot.app.settings import Settings, SettingsError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRET = "a-secret-of-thirty-two-characters"
KEYS = AuditKeys((AuditKey("k1", SECRET.encode()),))


def log(*signed: bool) -> list[AuditEntry]:
    """A chained log whose n-th entry is signed with ``KEYS`` when ``signed[n]``."""
    entries: list[AuditEntry] = []
    for seq, sign in enumerate(signed, start=1):
        draft = AuditDraft(
            at=T0 + timedelta(seconds=seq),
            approval_id="ap",
            run_id="run",  # shard 0
            action="approve",
            actor={"user_id": "U_DANA"},
        )
        entries.append(
            chain(draft, seq, entries[-1].hash if entries else GENESIS, KEYS if sign else None)
        )
    return entries


def head(entries: list[AuditEntry]) -> dict[int, tuple[int, str]]:
    """The heads of a log whose only entries are ``entries``, in shard 0."""
    empty = {shard: (0, genesis(shard)) for shard in range(AUDIT_SHARDS)}
    return empty | {0: (entries[-1].seq, entries[-1].hash)}


def test_entries_from_before_signing_are_unsigned_not_tampered() -> None:
    """Two entries written before a key was set, then signed ones: intact, two unsigned."""
    entries = log(False, False, True, True)
    report = examine(entries, head(entries), keys=KEYS)
    assert (report.ok, report.unsigned, report.chains[0].signed_from) == (True, 2, 3)


def test_an_unsigned_entry_after_signing_began_is_a_problem() -> None:
    """An unsigned entry after the first signed one is reported; it could be forged."""
    entries = log(False, True, False, True)
    report = examine(entries, head(entries), keys=KEYS)
    assert report.problems == ["shard 0: entry 3: unsigned, though signing began at entry 2"]
    assert report.unsigned == 1


def test_an_anchor_with_a_mac_moves_the_start_of_signing_back() -> None:
    """An anchor of a signed entry 2 makes entries 2 on required to be signed."""
    signed = log(False, True, True)
    stripped = [
        signed[0],
        *(
            chain(
                AuditDraft(
                    at=e.at,
                    approval_id=e.approval_id,
                    run_id=e.run_id,
                    action=e.action,
                    actor=e.actor,
                ),
                e.seq,
                e.prev_hash,
            )
            for e in signed[1:]
        ),
    ]
    line = anchor_of([signed[1]], T0).to_line()
    report = examine(stripped, head(stripped), anchor_lines=[line])
    assert report.chains[0].signed_from == 2
    assert report.problems == [
        "shard 0: entry 2: unsigned, though signing began at entry 2",
        "shard 0: entry 3: unsigned, though signing began at entry 2",
        "shard 0: anchor line 1: entry 2 no longer has the anchored MAC",
    ]


def test_anchor_lines_that_are_not_anchors_are_problems() -> None:
    """A line of the anchor file that is not an anchor is reported with its number."""
    entries = log(True)
    lines = [anchor_of(entries, T0).to_line(), '{"seq": 1}', "", "garbage"]
    report = examine(entries, head(entries), anchor_lines=lines)
    assert report.problems == ["anchor line 2 is not an anchor", "anchor line 4 is not an anchor"]
    assert report.anchors == 1


def test_an_edited_anchor_is_caught_with_the_key() -> None:
    """An anchor whose MAC does not match its (seq, hash) is reported when keys are given."""
    entries = log(True, True)
    forged = anchor_of([entries[1]], T0).to_line().replace(entries[1].mac or "", "0" * 64)
    report = examine(entries, head(entries), keys=KEYS, anchor_lines=[forged])
    assert report.problems[-1] == (
        "shard 0: anchor line 1: its MAC does not verify (the anchor file was edited)"
    )


def test_keys_come_from_the_variable_or_the_file(tmp_path: Path) -> None:
    """SIGNOFF_AUDIT_KEYS and SIGNOFF_AUDIT_KEYS_FILE give the same keys, the first signing."""
    text = f"k2:{SECRET}2, k1:{SECRET}"
    keyfile = tmp_path / "keys"
    keyfile.write_text(f"# rotated in March\nk2:{SECRET}2\nk1:{SECRET}  # old\n", encoding="utf-8")
    from_env = Settings.from_env({"SIGNOFF_AUDIT_KEYS": text}).audit_keys
    from_file = Settings.from_env({"SIGNOFF_AUDIT_KEYS_FILE": str(keyfile)}).audit_keys
    assert from_env == from_file
    assert from_env is not None
    assert from_env.kids == ("k2", "k1")
    assert SECRET not in repr(Settings.from_env({"SIGNOFF_AUDIT_KEYS": text}))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SIGNOFF_AUDIT_KEYS": SECRET}, "SIGNOFF_AUDIT_KEYS: key 1 is not of the form kid:secret"),
        ({"SIGNOFF_AUDIT_KEYS": "k1:short"}, "audit key 'k1' is shorter than 16 bytes"),
        ({"SIGNOFF_AUDIT_KEYS": f"k1:{SECRET},k1:{SECRET}x"}, "audit key ids given twice: k1"),
        ({"SIGNOFF_AUDIT_KEYS": f"k 1:{SECRET}"}, "key 1 is not of the form kid:secret"),
        ({"SIGNOFF_AUDIT_KEYS": f"k1:{SECRET}", "SIGNOFF_AUDIT_KEYS_FILE": "/x"}, "not both"),
        ({"SIGNOFF_AUDIT_KEYS_FILE": "/nonexistent/keys"}, "cannot read /nonexistent/keys"),
    ],
)
def test_bad_keys_are_refused_without_showing_the_secret(env: dict[str, str], message: str) -> None:
    """Malformed, short or duplicated keys raise SettingsError; the message has no secret."""
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(env)
    assert message in str(raised.value)
    assert SECRET not in str(raised.value)

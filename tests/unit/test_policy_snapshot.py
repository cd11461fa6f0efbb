"""The approval policy snapshot: its stored form never changes, and every stored form reads."""

from __future__ import annotations

from datetime import timedelta

from agent_runtime import ApprovalPolicy, OnExpiry, tool
from agent_runtime.policy import PolicySnapshot
from agent_runtime.serialization import canonical_json
from agent_runtime.tool_lookup import fingerprint

POLICY = ApprovalPolicy(
    approvers=("U_B", "U_A"),
    groups=("ops",),
    required=2,
    allow_requester=True,
    deadline=timedelta(minutes=90),
    on_expiry=OnExpiry.ESCALATE,
    escalate_to=("U_BOSS",),
    remind_every=timedelta(minutes=15),
)
GROUPS = {"ops": ("U_C",)}

WRITTEN = (
    '{"allow_requester":true,"approvers":["U_A","U_B","U_C"],"deadline_seconds":5400.0,'
    '"escalate_to":["U_BOSS"],"groups":["ops"],"on_expiry":"escalate",'
    '"remind_every_seconds":900.0,"required":2}'
)
"""The stored form of ``POLICY`` under ``GROUPS``, as approvals have always stored it."""


@tool(side_effect=True, approval=POLICY)
def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def test_the_stored_form_is_the_one_approvals_always_stored() -> None:
    """The snapshot's JSON (stored, audited, hashed into fingerprints) is byte for byte the
    form written before it was typed, so stored fingerprints and audit entries still match."""
    assert canonical_json(POLICY.snapshot(GROUPS).to_json()) == WRITTEN
    bare = ApprovalPolicy(approvers=("U_A",)).snapshot({})
    assert canonical_json(bare.to_json()) == (
        '{"allow_requester":false,"approvers":["U_A"],"deadline_seconds":86400.0,'
        '"escalate_to":[],"groups":[],"on_expiry":"reject","remind_every_seconds":null,'
        '"required":1}'
    )
    assert fingerprint(issue_refund, GROUPS) == (
        "b890182e3a4cd2e7e80f8bd906ff25d9a92af9035df6aac4cc0e2d22c4e1fbca"
    )


def test_a_stored_form_reads_back_to_the_same_snapshot_and_text() -> None:
    """Reading a stored snapshot gives the snapshot that was written, whose JSON is the
    stored text again."""
    snapshot = POLICY.snapshot(GROUPS)
    read = PolicySnapshot.from_json(snapshot.to_json())
    assert read == snapshot
    assert read.approvers == ("U_A", "U_B", "U_C")
    assert (read.deadline, read.remind_every, read.escalates) == (
        timedelta(minutes=90),
        timedelta(minutes=15),
        True,
    )
    assert canonical_json(read.to_json()) == WRITTEN


def test_rows_with_keys_missing_read_with_the_defaults_they_always_had() -> None:
    """A stored snapshot lacking keys (an empty one, or one with whole-number seconds)
    reads with the defaults the dict readers used: one approver needed, the requester
    excluded, 24 hours, fail-closed, no reminders."""
    assert PolicySnapshot.from_json({}) == PolicySnapshot(
        approvers=(),
        required=1,
        allow_requester=False,
        deadline=timedelta(hours=24),
        on_expiry=OnExpiry.REJECT,
        escalate_to=(),
        remind_every=None,
    )
    partial = PolicySnapshot.from_json({"approvers": ["U_DANA"], "deadline_seconds": 600})
    assert (partial.approvers, partial.deadline, partial.escalates) == (
        ("U_DANA",),
        timedelta(seconds=600),
        False,
    )

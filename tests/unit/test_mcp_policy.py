"""Which MCP tools the gateway gates, and the approval policy a policy file gives them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.mcp.exceptions import PolicyError
from bot.mcp.policy import GatePolicy, load_policy, needs_person


@pytest.mark.parametrize(
    ("annotations", "gated"),
    [
        (None, True),
        ({}, True),
        ({"readOnlyHint": True, "destructiveHint": True}, False),
        ({"destructiveHint": True}, True),
        ({"destructiveHint": False}, True),
        ({"destructiveHint": False, "openWorldHint": True}, True),
        ({"destructiveHint": False, "openWorldHint": False}, False),
    ],
)
def test_annotations_decide_by_default(annotations: dict[str, Any] | None, gated: bool) -> None:
    """Only read-only tools, or tools neither destructive nor open-world, pass ungated."""
    assert needs_person(annotations) is gated


def test_a_policy_file_overrides_per_tool(tmp_path: Path) -> None:
    """A YAML policy gates or frees named tools and sets approvers, quorum and deadline."""
    path = tmp_path / "policy.yaml"
    path.write_text(
        "approvers: [U1]\ndeadline_seconds: 60\ntools:\n"
        "  lookup: {gated: true, approvers: [U2, U3], required: 2}\n"
        "  wipe: {gated: false}\n"
    )
    policy = load_policy(path)
    assert policy.gated("lookup", {"readOnlyHint": True})
    assert not policy.gated("wipe", {"destructiveHint": True})
    lookup = policy.approval("lookup", ("U_DEFAULT",))
    assert (lookup.approvers, lookup.required, lookup.deadline) == (
        ("U2", "U3"),
        2,
        timedelta(seconds=60),
    )
    assert policy.approval("other", ("U_DEFAULT",)).approvers == ("U1",)


def test_without_a_file_the_configured_approvers_decide() -> None:
    """With no policy file a gated call goes to the configured approvers, one needed, 24 h."""
    policy = GatePolicy().approval("wipe", ("U_DEFAULT",))
    assert (policy.approvers, policy.required, policy.deadline) == (
        ("U_DEFAULT",),
        1,
        timedelta(hours=24),
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"tools": {"wipe": {"gated": "yes"}}}',
        '{"tools": {"wipe": {"required": 0}}}',
        '{"tools": {"wipe": {"approver": ["U1"]}}}',
        '{"tools": ["wipe"]}',
        "[1]",
        "{not json",
    ],
)
def test_a_bad_policy_file_is_refused_with_its_name(tmp_path: Path, text: str) -> None:
    """A malformed policy is refused before the gateway serves, naming the file."""
    path = tmp_path / "policy.json"
    path.write_text(text)
    with pytest.raises(PolicyError, match=r"policy\.json"):
        load_policy(path)


def test_the_rules_under_which_too_few_may_approve_are_named(tmp_path: Path) -> None:
    """With no approvers configured, the default and a gated tool naming nobody are named; so
    are a group with no members, a quorum larger than its approvers, and approvers who are
    only the requester; a tool with enough people of its own, or not gated, is not."""
    path = tmp_path / "policy.yaml"
    path.write_text(
        "tools:\n"
        "  wipe: {approvers: []}\n"
        "  lookup: {gated: false}\n"
        "  send: {groups: [ops]}\n"
        "  pay: {approvers: [U2]}\n"
        "  move: {approvers: [U2], required: 2}\n"
        "  own: {approvers: ['mcp:gw']}\n"
        "  mine: {approvers: ['mcp:gw'], allow_requester: true}\n"
    )
    policy = load_policy(path)
    assert policy.too_few_approve((), {}, "mcp:gw") == [
        "the default (needs 1, has 0)",
        "tool 'move' (needs 2, has 1)",
        "tool 'own' (needs 1, has 0)",
        "tool 'send' (needs 1, has 0)",
        "tool 'wipe' (needs 1, has 0)",
    ]
    assert policy.too_few_approve(("U1",), {"ops": ("U3",)}, "mcp:gw") == [
        "tool 'move' (needs 2, has 1)",
        "tool 'own' (needs 1, has 0)",
        "tool 'wipe' (needs 1, has 0)",
    ]
    assert GatePolicy().too_few_approve(("U1",), {}, "mcp:gw") == []


def test_a_deadline_yaml_reads_as_text_is_refused_showing_the_text(tmp_path: Path) -> None:
    """YAML reads ``1e12`` as text: the refusal shows the value as read (it said the
    deadline must be positive, which it looked to be)."""
    path = tmp_path / "policy.yaml"
    path.write_text("tools:\n  wipe: {deadline_seconds: 1e12}\n")
    with pytest.raises(PolicyError, match="deadline_seconds must be a positive number, not '1e12'"):
        load_policy(path)

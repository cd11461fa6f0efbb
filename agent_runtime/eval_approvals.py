"""What a candidate's trajectory means for the people who sign off: how many approvals it
would have asked for, how many of its calls people rejected in the recording, and how far its
arguments are from the ones approvers finally signed (after their edits)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from agent_runtime.serialization import canonical_json

if TYPE_CHECKING:
    from agent_runtime.evals import Call


@dataclass(frozen=True, slots=True)
class ApprovalCounts:
    """The approval side of one re-run (or, summed, of an eval)."""

    triggered: int = 0
    """The candidate's calls of tools that need a sign-off."""
    rejected_in_recording: int = 0
    """The candidate's calls that a person rejected in the recording."""
    signed_compared: int = 0
    """The candidate's calls set beside a call approvers signed (same tool, same turn of it)."""
    fields_from_signed: int = 0
    """Over those, how many argument fields differ from what approvers signed."""
    recorded_fields_from_signed: int = 0
    """The same for the recorded model's proposals: the baseline (its approvers' edits)."""

    def __add__(self, other: ApprovalCounts) -> ApprovalCounts:
        return ApprovalCounts(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(self))
        )

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def approval_counts(
    needs_approval: Callable[[str], bool], recorded: Sequence[Call], candidate: Sequence[Call]
) -> ApprovalCounts:
    """Count, for the candidate's calls, approvals asked, people's rejections in the recording,
    and argument fields differing from the signed ones (also for the recorded calls)."""
    signed = _signed(recorded)
    return ApprovalCounts(
        triggered=sum(needs_approval(call.tool) for call in candidate),
        rejected_in_recording=sum(_rejected_by_person(call) for call in candidate if call.replayed),
        signed_compared=len(_pairs(candidate, signed)),
        fields_from_signed=sum(_distance(c, s) for c, s in _pairs(candidate, signed)),
        recorded_fields_from_signed=sum(_distance(c, s) for c, s in _pairs(recorded, signed)),
    )


def _rejected_by_person(call: Call) -> bool:
    decision = call.decision or {}
    return decision.get("status") == "rejected" and not decision.get("automatic")


def _signed(recorded: Sequence[Call]) -> dict[str, list[dict[str, Any]]]:
    """The arguments approvers signed, per tool, in the order of the recorded calls."""
    found: dict[str, list[dict[str, Any]]] = {}
    for call in recorded:
        decision = call.decision or {}
        if decision.get("status") == "approved" and isinstance(decision.get("args"), dict):
            found.setdefault(call.tool, []).append(decision["args"])
        elif decision:
            found.setdefault(call.tool, []).append({})  # keeps the turns of the tool aligned
    return found


def _pairs(
    calls: Sequence[Call], signed: Mapping[str, list[dict[str, Any]]]
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each call beside the signed arguments of the same tool's same turn (if signed)."""
    turns: dict[str, int] = {}
    pairs = []
    for call in calls:
        turn = turns.get(call.tool, 0)
        turns[call.tool] = turn + 1
        options = signed.get(call.tool, [])
        if turn < len(options) and options[turn]:
            pairs.append((call.arguments, options[turn]))
    return pairs


def _distance(proposed: Mapping[str, Any], signed: Mapping[str, Any]) -> int:
    """How many top-level argument fields differ (missing on one side counts)."""
    names = set(proposed) | set(signed)
    return sum(
        name not in proposed
        or name not in signed
        or canonical_json(proposed[name]) != canonical_json(signed[name])
        for name in names
    )

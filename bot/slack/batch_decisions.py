"""Deciding a batch: each call decided, hashed and audited on its own, all or none allowed.

"Approve all" and "Reject all" are for someone allowed to decide every call still waiting:
if they may not decide one, nothing is decided (and their attempt is recorded as a click on
that call would be). Each approval counts only for the arguments its card showed, so a call
whose arguments changed since is refused on its own while the others are decided.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent_runtime import Actor, Approval, Approvals, ApprovalStatus, Decision
from agent_runtime.approval_service import DecisionResult
from bot.slack.text import escape, tool_name


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What a batch click did, call by call."""

    decided: list[tuple[Approval, str]] = field(default_factory=list)
    refused: list[tuple[Approval, str]] = field(default_factory=list)
    skipped: list[Approval] = field(default_factory=list)
    """Calls decided before the click (by anyone), left as they are."""

    def summary(self) -> str:
        """What to tell the person who clicked."""
        if not self.decided and self.refused:
            head = "Nothing was recorded: deciding all needs you to be allowed to decide each."
        else:
            head = f"Recorded {len(self.decided)} of {self._count()} calls."
        lines = [f"• `{tool_name(a.tool)}`: {escape(m)}" for a, m in self.decided]
        lines += [f"• `{tool_name(a.tool)}`: not recorded, {escape(m)}" for a, m in self.refused]
        lines += [f"• `{tool_name(a.tool)}`: already {a.status.value}" for a in self.skipped]
        return "\n".join([head, *lines])

    def _count(self) -> int:
        return len(self.decided) + len(self.refused) + len(self.skipped)


def waiting(batch: Sequence[Approval]) -> list[Approval]:
    """Return the calls of ``batch`` still waiting for a decision."""
    return [a for a in batch if a.status == ApprovalStatus.PENDING]


def refusals(
    approvals: Approvals, batch: Sequence[Approval], actor: Actor
) -> list[tuple[Approval, str]]:
    """Return the waiting calls of ``batch`` that ``actor`` may not decide, with why."""
    found = [(a, approvals.refusal_for(a.id, actor)) for a in waiting(batch)]
    return [(a, why) for a, why in found if why is not None]


def approve_batch(
    approvals: Approvals, batch: Sequence[tuple[Approval, str | None]], actor: Actor
) -> BatchOutcome:
    """Approve each waiting call of ``batch`` for the argument hash its card showed."""
    shown = {a.id: seen for a, seen in batch}
    calls = [a for a, _ in batch]
    refused = refusals(approvals, calls, actor)
    if refused:
        for approval, _ in refused:  # recorded as the attempt it is, deciding nothing
            approvals.decide(approval.id, actor, Decision.APPROVE, seen_hash=shown[approval.id])
        return BatchOutcome(refused=refused)
    return _each(
        calls,
        lambda a: approvals.decide(a.id, actor, Decision.APPROVE, seen_hash=shown[a.id] or ""),
    )


def reject_batch(
    approvals: Approvals, batch: Sequence[Approval], actor: Actor, reason: str
) -> BatchOutcome:
    """Reject each waiting call of ``batch`` with ``reason``."""
    refused = refusals(approvals, batch, actor)
    if refused:
        return BatchOutcome(refused=refused)
    return _each(batch, lambda a: approvals.decide(a.id, actor, Decision.REJECT, reason=reason))


def _each(batch: Sequence[Approval], decide: Callable[[Approval], DecisionResult]) -> BatchOutcome:
    outcome = BatchOutcome()
    for approval in batch:
        if approval.status != ApprovalStatus.PENDING:
            outcome.skipped.append(approval)
            continue
        result = decide(approval)
        target = outcome.decided if result.accepted else outcome.refused
        target.append((approval, result.message))
    return outcome

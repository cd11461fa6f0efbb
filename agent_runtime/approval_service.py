"""Request, decide and sweep approvals from any process."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.approvals import (
    Actor,
    Approval,
    ApprovalId,
    ApprovalKind,
    ApprovalStatus,
    Decision,
    Refusal,
    approval_id,
    args_hash,
    expire,
    judge,
)
from agent_runtime.audit import AuditDraft
from agent_runtime.clock import Clock
from agent_runtime.exceptions import InvalidInput, StoreUnavailable
from agent_runtime.grants import Grant
from agent_runtime.ids import RunId
from agent_runtime.notices import Notice, Notifier, Silent
from agent_runtime.policy import PolicySnapshot
from agent_runtime.previews import Shown, compute
from agent_runtime.quorum import quorum_refusal, quorum_shortfall
from agent_runtime.records import Event, Run
from agent_runtime.rule_decisions import grant_ruling, ruling, shadow_drafts
from agent_runtime.rules import RuleContext, Rules
from agent_runtime.serialization import canonical_json
from agent_runtime.step_names import wake_key
from agent_runtime.store import ApprovalStore, Granting, Save
from agent_runtime.tool_lookup import ToolLookup
from agent_runtime.tools import Tool

logger = logging.getLogger(__name__)

CAS_ATTEMPTS = 8
SWEEP_BATCH = 100
"""How many due approvals the sweep reads at a time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionResult:
    """The answer to a decision: taken or not, a message for the person, the approval now."""

    accepted: bool
    message: str
    approval: Approval
    refused_as: str | None = None
    """How the audit log names a refused attempt (``stale``, ``unauthorized``, ``late``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepResult:
    """What one sweep did: approvals expired, escalated, and due a reminder."""

    expired: list[Approval]
    escalated: list[Approval]
    reminded: list[Approval]

    @property
    def count(self) -> int:
        """How many approvals the sweep changed."""
        return len(self.expired) + len(self.escalated) + len(self.reminded)


class Approvals:
    """The approvals service: every method works from any process sharing the store."""

    def __init__(
        self,
        store: ApprovalStore,
        clock: Clock,
        tools: ToolLookup | None = None,
        notifier: Notifier | None = None,
        rules: Rules | None = None,
    ) -> None:
        self.store = store
        self._clock = clock
        self._tools = tools or ToolLookup()
        self.notifier: Notifier = notifier or Silent()
        self.rules = rules or Rules()

    def request(
        self,
        *,
        run_id: str,
        position: int,
        tool: Tool,
        args: dict[str, Any],
        policy: PolicySnapshot,
        requester: Actor,
        now: datetime,
        kind: ApprovalKind = ApprovalKind.TOOL_CALL,
        question: str = "",
        channel: str = "",
        preview: Shown | None = None,
    ) -> Approval:
        """Record an approval (idempotent: the id comes from run and position), pending unless
        its quorum cannot be met in the requester's workspace (rejected at once, see
        ``agent_runtime.quorum``), a rule about the tool decides it at once (see
        ``agent_runtime.rules``) or, when no enforcing rule matches, a grant covers it (see
        ``agent_runtime.grants``). ``channel`` is the channel the run was started from, which
        rules may look at; ``preview`` what the call would do, as the tool's preview said
        when asked."""
        approval = Approval(
            id=approval_id(run_id, position),
            run_id=run_id,
            position=position,
            kind=kind,
            tool=tool.name,
            args=args,
            args_hash=args_hash(args),
            fingerprint=self._tools.fingerprint(tool),
            policy=policy,
            requester=requester,
            requested_at=now,
            deadline=now + policy.deadline,
            reason_asked=question,
            remind_at=None if policy.remind_every is None else now + policy.remind_every,
            preview=None if preview is None else preview.to_json(),
            preview_digest=None if preview is None else preview.digest,
        )
        audit = self._draft(
            approval,
            "requested",
            requester,
            {
                "kind": kind.value,
                "tool": tool.name,
                "args": args,
                "args_hash": approval.args_hash,
                "policy": policy.to_json(),
                "deadline": approval.deadline.isoformat(),
            }
            | _preview_detail(approval),
        )
        notices = self.notifier.approval_changed(approval, "requested")
        shortfall = quorum_shortfall(policy, requester)
        if shortfall is not None:
            refusal = quorum_refusal(
                approval,
                shortfall,
                now,
                lambda a, action, actor, detail: self._draft(a, action, actor, detail, at=now),
                self.notifier.approval_changed,
                lambda d: self._wake(d, now),
            )
            return self.store.create_ruled_approval(approval, audit, notices, refusal)
        context = self.rule_context(tool.name, requester, channel)
        verdict = self.rules.verdict(tool.name, args, context)
        grant = None if verdict.rule is not None else self._covering_grant(approval, context, now)
        if kind != ApprovalKind.TOOL_CALL or (
            verdict.rule is None and not verdict.shadows and grant is None
        ):
            return self.store.create_approval(approval, audit, notices)

        def draft(
            a: Approval, action: str, actor: Actor | None, detail: dict[str, Any] | None
        ) -> AuditDraft:
            return self._draft(a, action, actor, detail, at=now)

        changed, wake = self.notifier.approval_changed, lambda d: self._wake(d, now)
        if grant is not None:
            shadows = shadow_drafts(approval, verdict, draft)
            found = grant_ruling(approval, grant, shadows, now, draft, changed, wake)
        else:
            found = ruling(approval, verdict, now, draft, changed, wake)
        return self.store.create_ruled_approval(approval, audit, notices, found)

    def _covering_grant(
        self, approval: Approval, context: RuleContext, now: datetime
    ) -> Grant | None:
        """Return the oldest grant that decides ``approval``, if any (read afresh each time, so
        a revocation anywhere counts at once)."""
        if approval.kind != ApprovalKind.TOOL_CALL:
            return None
        found = self.store.list_grants(active_at=now, tool=approval.tool)
        covering = [g for g in found if g.covers(approval, context, now)]
        return min(covering, key=lambda g: (g.granted_at, g.id)) if covering else None

    def rule_context(self, tool: str, requester: Actor, channel: str = "") -> RuleContext:
        """Return what rules see of a call of ``tool`` besides its arguments."""
        return RuleContext(
            requester=requester.user_id, groups=self._tools.groups(tool), channel=channel
        )

    def get(self, approval: str) -> Approval:
        """Return the approval or raise ``ApprovalNotFound``."""
        return self.store.get_approval(approval)

    def is_stale(self, approval: Approval) -> bool:
        """Tell whether the tool or its policy changed since the approval was asked."""
        tool = self._tools.get(approval.tool)
        return tool is None or self._tools.fingerprint(tool) != approval.fingerprint

    def decide(
        self,
        approval: str,
        actor: Actor,
        decision: Decision,
        *,
        reason: str | None = None,
        edited_args: dict[str, Any] | None = None,
        seen_hash: str | None = None,
        grant: Callable[[Approval], Granting] | None = None,
    ) -> DecisionResult:
        """Decide an approval: a compare-and-set, so the first valid decision wins anywhere.

        ``seen_hash`` is the hash of the arguments the person was shown; an approval or edit
        counts only if they are still the ones proposed (see ``judge``). A refused decision
        (not allowed, too late, stale, already decided) changes nothing and is recorded in
        the audit log as an attempt. Invalid edited arguments raise InvalidInput. With
        ``grant``, a decision that approves the call also stores, in its transaction, the
        grant ``grant`` makes of the approved approval (see ``agent_runtime.grant_service``).

        An approval or a rejection is judged on the approval as stored, under its lock, in
        the transaction that saves it (``ApprovalStore.decide_approval``); an edit (whose
        preview runs the tool's code) and a decision making a grant are judged on a read and
        saved if the approval has not changed since, else judged again.
        """
        if decision != Decision.EDIT and grant is None:
            return self._decide_locked(approval, actor, decision, reason, seen_hash)
        for _ in range(CAS_ATTEMPTS):
            current = self.store.get_approval(approval)
            now = self._clock.now()
            if decision == Decision.EDIT:
                self._check_edit(current, edited_args)
            verdict = self._judge(current, actor, decision, now, reason, edited_args, seen_hash)
            if isinstance(verdict, Refusal):
                return self._refuse(current, actor, decision, verdict, now)
            if decision == Decision.EDIT:
                verdict = self._previewed(verdict)
            granting = (
                grant(verdict)
                if grant is not None and verdict.status == ApprovalStatus.APPROVED
                else None
            )
            save = self._save_of(current, verdict, actor, decision, now, seen_hash)
            if self._save(save, granting):
                return DecisionResult(accepted=True, message=_accepted(verdict), approval=verdict)
        raise StoreUnavailable(f"approval {approval} kept changing; try again")

    def _decide_locked(
        self,
        approval: str,
        actor: Actor,
        decision: Decision,
        reason: str | None,
        seen_hash: str | None,
    ) -> DecisionResult:
        """Approve or reject, judged on the approval as stored, under its lock."""
        refusals: list[tuple[Refusal, datetime]] = []

        def judged(current: Approval) -> Save | None:
            now = self._clock.now()
            verdict = self._judge(current, actor, decision, now, reason, None, seen_hash)
            if isinstance(verdict, Refusal):
                refusals.append((verdict, now))
                return None
            return self._save_of(current, verdict, actor, decision, now, seen_hash)

        current, save = self.store.decide_approval(approval, judged)
        if save is None:
            refusal, now = refusals[-1]
            return self._refuse(current, actor, decision, refusal, now)
        return DecisionResult(
            accepted=True, message=_accepted(save.approval), approval=save.approval
        )

    def _previewed(self, edited: Approval) -> Approval:
        """The edited approval with the preview of its edited arguments: a decision binds to
        what the call would do with the arguments it approves."""
        tool = self._tools.get(edited.tool)
        if tool is None or tool.preview is None:
            return edited
        shown = compute(tool.preview, edited.proposed_args)
        return dataclasses.replace(edited, preview=shown.to_json(), preview_digest=shown.digest)

    def supersede(self, approval: Approval, preview: Shown, note: str) -> bool:
        """Close an approved, unused approval as superseded: what the call would do is now
        ``preview``, which nobody approved. Its card shows ``note``; the audit log records
        the new preview. False if it was no longer approved and unused."""
        for _ in range(CAS_ATTEMPTS):
            current = self.store.get_approval(approval.id)
            if current.status != ApprovalStatus.APPROVED or current.consumed_by is not None:
                return current.status == ApprovalStatus.SUPERSEDED
            now = self._clock.now()
            new = dataclasses.replace(
                current, status=ApprovalStatus.SUPERSEDED, reason=note, remind_at=None
            )
            detail = {
                "reason": note,
                "preview_digest": current.preview_digest,
                "new_preview": preview.to_json(),
                "new_preview_digest": preview.digest,
            }
            if self.store.save_approval(
                new,
                audit=self._draft(current, "superseded", None, detail, at=now),
                decided_before=None,
                wake=None,
                notices=self.notifier.approval_changed(new, "superseded"),
            ):
                return True
        raise StoreUnavailable(f"approval {approval.id} kept changing; try again")

    def cancel_run(
        self,
        run_id: RunId,
        actor: Actor | None,
        notices: Sequence[Notice],
        now: datetime,
        *,
        while_pending: str | None = None,
    ) -> Run:
        """Cancel the run and close its pending approvals (as cancelled) in one transaction,
        so no card of a cancelled run can still be approved. With ``while_pending``, only if
        that approval is still pending then (``ApprovalNotPending`` otherwise)."""
        reason = "the run was cancelled" + ("" if actor is None else f" by {actor.label}")

        def close(pending: Approval) -> tuple[Approval, AuditDraft, Sequence[Notice]]:
            new = dataclasses.replace(
                pending,
                status=ApprovalStatus.CANCELLED,
                decided_by=actor,
                decided_at=now,
                reason=reason,
                remind_at=None,
            )
            audit = self._draft(pending, "closed", actor, {"reason": reason}, at=now)
            return new, audit, self.notifier.approval_changed(new, "closed")

        return self.store.cancel_run(run_id, now, notices, close, while_pending=while_pending)

    def refusal_for(self, approval: str, actor: Actor) -> str | None:
        """Tell why ``actor`` could not decide the approval now (None if they could)."""
        verdict = self._judge(
            self.store.get_approval(approval),
            actor,
            Decision.APPROVE,
            self._clock.now(),
            None,
            None,
        )
        return verdict.message if isinstance(verdict, Refusal) else None

    def refuse(self, approval: str, actor: Actor, decision: Decision) -> DecisionResult | None:
        """Return why ``actor`` may not take ``decision`` on the approval now, recorded in
        the audit log as a refused attempt like any decision's; None if they may."""
        current = self.store.get_approval(approval)
        now = self._clock.now()
        # the decision on what was proposed: whether it may be taken depends on who and when
        verdict = self._judge(current, actor, decision, now, decision.value, current.proposed_args)
        if isinstance(verdict, Refusal):
            return self._refuse(current, actor, decision, verdict, now)
        return None

    def sweep(self, now: datetime | None = None, *, batch: int = SWEEP_BATCH) -> SweepResult:
        """Expire (fail-closed) or escalate overdue approvals and move reminders along.

        Reads ``batch`` due approvals at a time, until none is left or a batch changes
        nothing (another process is sweeping the same ones).
        """
        now = now or self._clock.now()
        result = SweepResult(expired=[], escalated=[], reminded=[])
        while True:
            due = self.store.due_approvals(now, batch)
            done = result.count
            for approval in due:
                self._sweep_one(approval, now, result)
            if len(due) < batch or result.count == done:
                return result

    def _sweep_one(self, approval: Approval, now: datetime, result: SweepResult) -> None:
        if approval.deadline <= now:
            self._expire_or_escalate(approval, now, result)
        elif approval.remind_at is not None and approval.remind_at <= now:
            self._remind(approval, now, result)

    def _judge(
        self,
        current: Approval,
        actor: Actor,
        decision: Decision,
        now: datetime,
        reason: str | None,
        edited_args: dict[str, Any] | None,
        seen_hash: str | None = None,
    ) -> Approval | Refusal:
        stale = current.status == ApprovalStatus.PENDING and decision != Decision.REJECT
        if stale and self.is_stale(current):  # a rejection is never stale: it runs nothing
            return Refusal(
                message="this approval is stale: the tool or its policy changed "
                "since it was asked; it cannot be approved (reject it, and the agent "
                "is told, or cancel the run)",
                audit="stale",
            )
        return judge(
            current,
            actor,
            decision,
            now,
            reason=reason,
            edited_args=edited_args,
            seen_hash=seen_hash,
        )

    def _check_edit(self, current: Approval, edited: dict[str, Any] | None) -> None:
        tool = self._tools.get(current.tool)
        if edited is None or tool is None:
            return
        errors = tool.validation_errors(edited)
        if errors:
            raise InvalidInput(current.tool, "; ".join(errors))
        canonical_json(edited, what="edited arguments")

    def _refuse(
        self,
        current: Approval,
        actor: Actor,
        decision: Decision,
        refusal: Refusal,
        now: datetime,
    ) -> DecisionResult:
        if refusal.audit is not None:
            self.store.append_audit(
                self._draft(
                    current,
                    refusal.audit,
                    actor,
                    {"decision": decision.value, "message": refusal.message},
                    at=now,
                )
            )
        logger.info(
            "decision refused",
            extra={"action": refusal.audit or "refused", "run_id": current.run_id},
        )
        return DecisionResult(
            accepted=False, message=refusal.message, approval=current, refused_as=refusal.audit
        )

    def _save(self, save: Save, grant: Granting | None) -> bool:
        return self.store.save_approval(
            save.approval,
            audit=save.audit,
            decided_before=save.decided_before,
            wake=save.wake,
            notices=save.notices,
            grant=grant,
        )

    def _save_of(
        self,
        current: Approval,
        new: Approval,
        actor: Actor,
        decision: Decision,
        now: datetime,
        seen_hash: str | None,
    ) -> Save:
        """The save of ``decision``, taken by ``actor`` on ``current``, leaving it ``new``:
        its audit entry, the run's wake-up if it is final, and its Slack notices."""
        final = new.status != ApprovalStatus.PENDING
        detail = {
            "decision": decision.value,
            "status": new.status.value,
            "seen_args_hash": seen_hash,
            "args": new.decided_args,
            "args_hash": new.decided_args_hash,
            "reason": new.reason,
            "diff": new.diff,
        } | _preview_detail(new)
        audit = self._draft(current, decision.value, actor, detail, at=now)
        return Save(
            approval=new,
            audit=audit,
            decided_before=now,
            wake=self._wake(new, now) if final else None,
            notices=tuple(self.notifier.approval_changed(new, audit.action)),
        )

    def _expire_or_escalate(self, approval: Approval, now: datetime, result: SweepResult) -> None:
        policy = approval.policy
        if policy.escalates and not approval.escalated:
            new = dataclasses.replace(approval, escalated=True, deadline=now + policy.deadline)
            audit = self._draft(
                approval,
                "escalated",
                None,
                {"to": list(policy.escalate_to), "deadline": new.deadline.isoformat()},
                at=now,
            )
            if self.store.save_approval(
                new,
                audit=audit,
                decided_before=None,
                wake=None,
                notices=self.notifier.approval_changed(new, "escalated"),
            ):
                result.escalated.append(new)
            return
        new = expire(approval, now)
        audit = self._draft(
            approval, "expired", None, {"deadline": approval.deadline.isoformat()}, at=now
        )
        if self.store.save_approval(
            new,
            audit=audit,
            decided_before=None,
            wake=self._wake(new, now),
            notices=self.notifier.approval_changed(new, "expired"),
        ):
            result.expired.append(new)

    def _remind(self, approval: Approval, now: datetime, result: SweepResult) -> None:
        interval = approval.policy.remind_every
        assert interval is not None  # only an approval with reminders has a remind_at
        new = dataclasses.replace(approval, remind_at=now + interval)
        audit = self._draft(approval, "reminded", None, None, at=now)
        if self.store.save_approval(
            new,
            audit=audit,
            decided_before=None,
            wake=None,
            notices=self.notifier.approval_changed(new, "reminded"),
        ):
            result.reminded.append(new)

    def _wake(self, approval: Approval, now: datetime) -> Event:
        return Event(key=wake_key(approval.id), data=approval.summary(), delivered_at=now)

    def _draft(
        self,
        approval: Approval,
        action: str,
        actor: Actor | None,
        detail: dict[str, Any] | None,
        *,
        at: datetime | None = None,
    ) -> AuditDraft:
        return AuditDraft(
            at=at or approval.requested_at,
            approval_id=approval.id,
            run_id=approval.run_id,
            action=action,
            actor=None if actor is None else actor.to_json(),
            detail=detail,
        )


def _preview_detail(approval: Approval) -> dict[str, Any]:
    """The audit detail of what the call would do, when the tool says (nothing otherwise)."""
    if approval.preview is None:
        return {}
    return {"preview": approval.preview, "preview_digest": approval.preview_digest}


def _accepted(approval: Approval) -> str:
    if approval.status == ApprovalStatus.PENDING:
        needed = approval.policy.required - len(approval.approvals)
        return f"approval recorded; {needed} more needed"
    who = approval.decided_by.label if approval.decided_by else "deadline"
    return f"{approval.status.value} by {who}"


__all__ = ["ApprovalId", "Approvals", "DecisionResult", "SweepResult", "ToolLookup", "wake_key"]

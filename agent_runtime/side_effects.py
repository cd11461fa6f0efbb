"""Tool execution: approvals first, an idempotency key always, and care after a crash.

A side-effecting call journals "started" (with its idempotency key) before the tool runs
and its result after. Found started but not finished on resume, the outcome is unknown:
the tool's policy decides whether to retry with the same key, ask ``verify(key)``, or ask a
person whether it happened.

A tool with a preview has it computed when its approval is asked and again as the call
starts: if what the call would do changed since it was approved, it does not run; the
approval is closed as superseded and asked again with the new preview.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.agent import Agent
from agent_runtime.approval_service import Approvals, wake_key
from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus, args_hash
from agent_runtime.budget import Consumption
from agent_runtime.budget_ask import budget_tool, is_budget_approval_tool
from agent_runtime.context import RunContext
from agent_runtime.decisions import (
    Approved,
    Cancelled,
    Declined,
    Expired,
    Rejected,
    read_decision,
    status_of,
)
from agent_runtime.exceptions import ApprovalNotFound
from agent_runtime.policy import ApprovalPolicy
from agent_runtime.previews import Shown, compute
from agent_runtime.step_names import (
    APPROVAL_REQUEST,
    TOOL,
    TOOL_STARTED,
    TOOL_UNKNOWN_OUTCOME,
    TOOL_VERIFY,
    of_tool,
)
from agent_runtime.tools import Tool, UnknownOutcome

PREVIEW_CHANGED = (
    "what the call would do changed since it was approved (its preview differs from the "
    "one the approver saw); nothing was run and the approval is asked again"
)
PREVIEW_FAILED = "its preview could not be computed again just before running, so nothing ran"


def idempotency_key(run_id: str, position: int) -> str:
    """Return the key of the side effect started at ``position``: stable everywhere."""
    return f"signoff-{run_id}-{position}"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What goes back to the model for one tool call."""

    content: str
    is_error: bool = False

    @classmethod
    def of(cls, value: Any) -> ToolResult:
        """Wrap a tool's JSON result."""
        if isinstance(value, str):
            return cls(value)
        # sorted keys: a result read back from the journal (PostgreSQL's jsonb reorders
        # keys) must give the model byte-identical input, or replay would diverge
        return cls(json.dumps(value, ensure_ascii=False, sort_keys=True))

    @classmethod
    def error(cls, message: str) -> ToolResult:
        """An error the model should see and adapt to."""
        return cls(message, is_error=True)

    @classmethod
    def declined(cls, decision: Declined) -> ToolResult:
        """The call was not approved: say by whom and why, so the agent can adapt."""
        match decision:
            case Rejected(by=by) | Cancelled(by=by):
                who = by.label if by is not None else ""
            case Expired():
                who = ""
        reason = decision.reason or "no reason given"
        status = status_of(decision).value
        return cls(f"not executed: {status} by {who or 'the deadline'}: {reason}", is_error=True)


class SideEffects:
    """Runs one agent run's tool calls under approvals and idempotency keys."""

    def __init__(
        self,
        ctx: RunContext,
        approvals: Approvals,
        agent: Agent,
        requester: Actor,
        used: Consumption,
        *,
        channel: str = "",
    ) -> None:
        self.ctx = ctx
        self.channel = channel
        self.approvals = approvals
        self.agent = agent
        self.requester = requester
        self.used = used

    def request_approval(
        self,
        tool: Tool,
        args: dict[str, Any],
        *,
        kind: ApprovalKind = ApprovalKind.TOOL_CALL,
        question: str = "",
    ) -> str:
        """Journal a pending approval for ``tool(args)`` and return its id (no waiting)."""
        now = self.ctx.now().isoformat()
        output = self.ctx.step(
            self._request_step,
            tool.name,
            args,
            kind.value,
            question,
            now,
            self.ctx.position,
            name=of_tool(APPROVAL_REQUEST, tool.name),
        )
        approval: str = output["approval_id"]
        return approval

    def _request_step(
        self, name: str, args: dict[str, Any], kind: str, question: str, now: str, position: int
    ) -> dict[str, Any]:
        tool = self._tool(name)
        preview = None if tool.preview is None else compute(tool.preview, args)
        approval = self.approvals.request(
            run_id=self.ctx.run_id,
            position=position,
            tool=tool,
            args=args,
            policy=self._policy(tool).snapshot(self.agent.approver_groups),
            requester=self.requester,
            now=datetime.fromisoformat(now),
            kind=ApprovalKind(kind),
            question=question,
            channel=self.channel,
            preview=preview if kind == ApprovalKind.TOOL_CALL.value else None,
        )
        return {"approval_id": approval.id, "deadline": approval.deadline.isoformat()}

    def execute(self, tool: Tool, args: dict[str, Any], approved: Approved | None) -> ToolResult:
        """Run the tool once; side-effecting tools get started/finished records and a key."""
        self.used.tool_calls += 1
        if not tool.side_effect:
            return ToolResult.of(
                self._run(tool, args, idempotency_key(self.ctx.run_id, self.ctx.position))
            )
        return self._side_effect(tool, args, approved)

    def _side_effect(
        self, tool: Tool, args: dict[str, Any], approved: Approved | None
    ) -> ToolResult:
        from_journal = self.ctx.replaying
        position = self.ctx.position
        key = idempotency_key(self.ctx.run_id, position)
        approval = None if approved is None else approved.approval_id
        started = self.ctx.step(
            self._start, tool.name, args, approval, position, name=of_tool(TOOL_STARTED, tool.name)
        )
        if started.get("ask_again"):
            return self._ask_again(tool, args)
        if started.get("refused"):
            return ToolResult.error(f"not executed: {started['refused']}")
        marker = of_tool(TOOL_UNKNOWN_OUTCOME, tool.name)
        if from_journal and self.ctx.next_step_name() in (None, marker):
            return self._unknown_outcome(tool, args, key)
        return ToolResult.of(self._run(tool, args, key))

    def _start(
        self, name: str, args: dict[str, Any], approval: str | None, position: int
    ) -> dict[str, Any]:
        """Check the committed approval against these exact arguments and consume it."""
        digest = args_hash(args)
        key = idempotency_key(self.ctx.run_id, position)
        if self._tool(name).approval is not None:
            refused = self._check_approval(approval, name, args, digest, position)
            if isinstance(refused, dict):
                return refused | {"key": key}
            if refused:
                return {"refused": refused, "key": key}
        return {"key": key, "args_hash": digest, "approval_id": approval}

    def _ask_again(self, tool: Tool, args: dict[str, Any]) -> ToolResult:
        """Ask for a new approval of the call (showing its new preview) and run it once given."""
        asked = self.request_approval(tool, args)
        match read_decision(self.ctx.wait_for(wake_key(asked))):
            case Approved() as approved:
                return self._side_effect(tool, approved.args, approved)
            case declined:
                return ToolResult.declined(declined)

    def _check_approval(
        self, approval: str | None, tool: str, args: dict[str, Any], digest: str, position: int
    ) -> str | dict[str, Any] | None:
        if approval is None:
            return "this tool needs an approval and none was given"
        try:
            record = self.approvals.get(approval)
        except ApprovalNotFound:
            return "no such approval"
        if record.run_id != self.ctx.run_id or record.tool != tool:
            return "the approval was given for another call"
        if record.status == ApprovalStatus.SUPERSEDED and record.consumed_by is None:
            return {"refused": PREVIEW_CHANGED, "ask_again": True}  # superseded, then a crash
        if record.status != ApprovalStatus.APPROVED:
            return f"the approval is {record.status.value}"
        if record.decided_args_hash != digest:
            return "the arguments differ from the approved ones"
        if self.approvals.is_stale(record):
            return "the approval is stale: the tool or its policy changed since it was given"
        drift = self._preview_drift(record, args)
        if drift is not None:
            return drift
        if not self.approvals.store.consume_approval(approval, position):
            return "the approval was already used by another call"
        return None

    def _preview_drift(self, record: Approval, args: dict[str, Any]) -> dict[str, Any] | None:
        """Compute the preview of the call about to run (``args``, whose hash is the approved
        one) again; refuse the call if it is not the preview approved.

        Approvals asked without a preview (before the tool had one) are not checked.
        """
        if record.preview is None:
            return None
        tool = self._tool(record.tool)
        if tool.preview is None:
            shown = Shown(None, "the tool no longer declares a preview")
        else:
            shown = compute(tool.preview, args)
        if shown.preview is None:
            return {"refused": f"{PREVIEW_FAILED}: {shown.error}", "preview": shown.to_json()}
        if shown.digest == record.preview_digest:
            return None
        self.approvals.supersede(record, shown, PREVIEW_CHANGED)
        return {"refused": PREVIEW_CHANGED, "ask_again": True, "preview": shown.to_json()}

    def _run(self, tool: Tool, args: dict[str, Any], key: str) -> Any:
        return self.ctx.step(
            tool.call,
            args,
            key,
            name=of_tool(TOOL, tool.name),
            retry=tool.retry,
            timeout=tool.timeout,
        )

    def _unknown_outcome(self, tool: Tool, args: dict[str, Any], key: str) -> ToolResult:
        strategy = tool.on_unknown_outcome
        self.ctx.step(
            _record,
            {"key": key, "strategy": strategy.value},
            name=of_tool(TOOL_UNKNOWN_OUTCOME, tool.name),
        )  # marker: see execute()
        if strategy == UnknownOutcome.VERIFY and tool.verify is not None:
            found = self.ctx.step(tool.verify, key, name=of_tool(TOOL_VERIFY, tool.name))
            if found is not None:
                return ToolResult.of(found)
        elif strategy == UnknownOutcome.ASK:
            answer = self._ask_person(tool, args, key)
            if answer is not None:
                return answer
        return ToolResult.of(self._run(tool, args, key))

    def _ask_person(self, tool: Tool, args: dict[str, Any], key: str) -> ToolResult | None:
        question = (
            f"A crash interrupted {tool.name} (idempotency key {key}). Did it happen? "
            "Approve = yes, it happened; Reject = no, run it again."
        )
        asked = self.request_approval(tool, args, kind=ApprovalKind.OUTCOME, question=question)
        match read_decision(self.ctx.wait_for(wake_key(asked))):
            case Approved():
                return ToolResult.of({"status": "confirmed by a person", "idempotency_key": key})
            case Rejected():
                return None
            case _:
                return ToolResult.error(
                    f"outcome of {tool.name} unknown and unconfirmed; not retried"
                )

    def _policy(self, tool: Tool) -> ApprovalPolicy:
        if tool.approval is not None:
            return tool.approval
        return ApprovalPolicy(approvers=(self.requester.user_id,), allow_requester=True)

    def _tool(self, name: str) -> Tool:
        tool = self.agent.tools.get(name)
        if tool is None and is_budget_approval_tool(name):
            tool = budget_tool(self.agent)
        if tool is None:
            raise LookupError(f"tool {name!r} is no longer defined")
        return tool


def _record(data: dict[str, Any]) -> dict[str, Any]:
    return data

"""The synchronous half of a gated call: journal it, ask for sign-off, check it, record it.

Every method is called from a worker thread of the gateway's event loop and holds the
run's lock while it reads or writes the journal. A call is gated exactly as a native
side-effecting tool is: a pending approval recorded through ``Approvals.request``, and
the upstream tool called only with the arguments of a committed approval whose hash
matches, consumed once by this call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_runtime import Actor, Approval, ApprovalStatus, RunId
from agent_runtime.approvals import args_hash
from agent_runtime.policy import PolicySnapshot
from agent_runtime.side_effects import idempotency_key
from bot.mcp.calls import (
    CALL,
    DECISION,
    REQUEST,
    RESULT,
    STARTED,
    Call,
    entry_name,
    lost_answer,
    read_calls,
    unanswered,
)
from bot.mcp.session_run import GatewayRun
from bot.mcp.tools import qualified_name, upstream_tool


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRequest:
    """A ``tools/call`` as the client made it, with what the gateway's policy says of it."""

    tool: str
    args: dict[str, Any]
    gated: bool
    definition: str
    """A digest of the tool's upstream definition and the policy it is called under."""
    policy: PolicySnapshot | None
    """The approval policy snapshot for a gated call (None for another)."""
    read_only: bool = False
    """The tool's annotations say it only reads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Go:
    """The upstream tool may be called once, with exactly these arguments and this key."""

    args: dict[str, Any]
    key: str


class SignOffs:
    """Journals one gateway run's calls and the sign-offs they wait for."""

    def __init__(self, run: GatewayRun, requester: Actor) -> None:
        self._run = run
        self._approvals = run.services.approvals
        self._clock = run.services.runtime.clock
        self._requester = requester
        calls = read_calls(run.journal())
        self._unanswered = unanswered(calls)
        self._lost = lost_answer(calls)

    @property
    def run_id(self) -> RunId:
        """The id of the run these calls are journaled in."""
        return self._run.run_id

    def open(self, request: CallRequest) -> Call:
        """Return the call this one retries, else journal a new one; ask for sign-off if it
        needs one and none was asked yet.

        A call retries an unanswered call of the same tool with the same arguments (its
        client timed out, or the gateway died); the first call with a side effect in a new
        gateway may also retry the last call, whose answer may have been lost.
        """
        digest = args_hash(request.args)
        with self._run.lock:
            call = self._retried(request, digest) or self._new(request, digest)
            if call.gated and call.approval_id is None and call.result is None:
                self._request(call, request.policy)
            return call

    def decision(self, call: Call) -> dict[str, Any] | None:
        """Return the call's decision once a person (or the deadline) made it, else None."""
        with self._run.lock:
            if call.decision is not None:
                return call.decision
            approval = self._current(call)
            if approval.status == ApprovalStatus.PENDING:
                return None
            self._append(call, DECISION, {"call": call.position, **approval.summary()})
            return call.decision

    def start(self, call: Call, definition: str) -> Go | str:
        """Journal that the upstream call is about to be made; or say why it must not be."""
        with self._run.lock:
            if definition != call.definition:
                return "the tool or its policy changed since the call was made"
            args: dict[str, Any] = call.args
            approval = None
            if call.gated:
                checked = self._approved(call)
                if isinstance(checked, str):
                    return checked
                approval, args = checked.id, checked.proposed_args
            key = idempotency_key(self._run.run_id, call.position)
            self._append(
                call,
                STARTED,
                {
                    "call": call.position,
                    "key": key,
                    "args_hash": args_hash(args),
                    "approval_id": approval,
                },
            )
            return Go(args=args, key=key)

    def finish(self, call: Call, result: dict[str, Any]) -> None:
        """Journal what the client is answered."""
        with self._run.lock:
            self._append(call, RESULT, {"call": call.position, "result": result})
            self._unanswered.remove(call)

    def answer_lost(self, call: Call) -> None:
        """Nobody received ``call``'s answer (its client stopped waiting while it ran): the
        next call with a side effect that repeats it gets that answer, as after a crash."""
        with self._run.lock:
            self._lost = call

    def _retried(self, request: CallRequest, digest: str) -> Call | None:
        joined = next((c for c in self._unanswered if c.matches(request.tool, digest)), None)
        if joined is not None or request.read_only:
            return joined
        lost, self._lost = self._lost, None  # only the first call with a side effect
        return lost if lost is not None and lost.matches(request.tool, digest) else None

    def _new(self, request: CallRequest, digest: str) -> Call:
        output = {
            "tool": request.tool,
            "args": request.args,
            "args_hash": digest,
            "gated": request.gated,
            "definition": request.definition,
            "read_only": request.read_only,
        }
        position = self._run.append(
            entry_name(CALL, request.tool), {"tool": request.tool, "args_hash": digest}, output
        )
        call = Call(
            position=position,
            tool=request.tool,
            args=request.args,
            args_hash=digest,
            gated=request.gated,
            definition=request.definition,
            read_only=request.read_only,
        )
        self._unanswered.append(call)
        return call

    def _request(self, call: Call, policy: PolicySnapshot | None) -> None:
        assert policy is not None  # a gated call has a policy
        position = self._run.next_position
        approval = self._approvals.request(
            run_id=self._run.run_id,
            position=position,
            tool=upstream_tool(self._name(call)),
            args=call.args,
            policy=policy,
            requester=self._requester,
            now=self._clock.now(),
        )
        self._append(
            call,
            REQUEST,
            {
                "call": call.position,
                "approval_id": approval.id,
                "deadline": approval.deadline.isoformat(),
            },
        )

    def _current(self, call: Call) -> Approval:
        """Return the call's approval, expired first if its deadline passed (fail-closed)."""
        assert call.approval_id is not None
        approval = self._approvals.get(call.approval_id)
        now = self._clock.now()
        if approval.status == ApprovalStatus.PENDING and now >= approval.deadline:
            self._approvals.sweep(now)
            approval = self._approvals.get(call.approval_id)
        return approval

    def _approved(self, call: Call) -> Approval | str:
        assert call.approval_id is not None
        approval = self._approvals.get(call.approval_id)
        if approval.run_id != self._run.run_id or approval.tool != self._name(call):
            return "the approval was given for another call"
        if approval.status != ApprovalStatus.APPROVED:
            return f"the approval is {approval.status.value}"
        if approval.decided_args_hash != args_hash(approval.proposed_args):
            return "the arguments differ from the approved ones"
        if not self._approvals.store.consume_approval(approval.id, call.position):
            return "the approval was already used by another call"
        return approval

    def _append(self, call: Call, kind: str, output: dict[str, Any]) -> None:
        self._run.append(entry_name(kind, call.tool), {"call": call.position}, output)
        call.entries[kind] = output

    def _name(self, call: Call) -> str:
        return qualified_name(self._run.key.gateway, call.tool)

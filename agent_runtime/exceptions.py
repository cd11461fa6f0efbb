"""Errors raised by the runtime. Every error says whether retrying the same call may succeed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any


class SignoffError(Exception):
    """Root of every error the runtime raises."""

    retryable: bool = False


class UserError(SignoffError):
    """What was asked cannot be done as given, and the person who asked can fix it (the
    command line exits 2 for these, 1 for every other error)."""


class StoreUnavailable(SignoffError):
    """The database could not be reached or answered with a transient failure."""

    retryable = True


class InvalidConfiguration(UserError):
    """A setting (a database URL, say) cannot be used as given."""


class RunNotFound(UserError):
    """No run has the given id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id}")
        self.run_id = run_id


class RunExists(UserError):
    """A run with the given id exists already (an id chosen beforehand was taken)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"a run with id {run_id} exists already")
        self.run_id = run_id


class WorkflowNotFound(UserError):
    """No workflow is registered under the given name."""

    def __init__(self, name: str, known: list[str]) -> None:
        listed = ", ".join(known) or "none"
        super().__init__(f"unknown workflow {name!r} (registered: {listed})")
        self.name = name
        self.known = known


class InvalidInput(UserError):
    """A run's input was rejected by its workflow before the run was created."""

    def __init__(self, workflow: str, detail: str) -> None:
        super().__init__(f"invalid input for {workflow}: {detail}")
        self.workflow = workflow
        self.detail = detail


class InvalidRunState(UserError):
    """The run is not in a state that allows the requested operation."""

    def __init__(self, run_id: str, status: str, operation: str) -> None:
        super().__init__(f"cannot {operation} run {run_id}: it is {status}")
        self.run_id = run_id
        self.status = status
        self.operation = operation


class NotSerializable(UserError):
    """A step input or output cannot be stored as JSON."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what} cannot be stored as JSON: {detail}")
        self.what = what
        self.detail = detail


class UnsafeJson(SignoffError):
    """JSON from outside that could not be stored or shown as it is (see ``json_limits``)."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"the JSON holds {problem}")
        self.problem = problem


class LeaseLost(SignoffError):
    """This worker no longer holds the run's lease, so it may not write to the run."""

    retryable = True

    def __init__(self, run_id: str, fence: int) -> None:
        super().__init__(f"lease on run {run_id} (fence {fence}) was lost")
        self.run_id = run_id
        self.fence = fence


class JournalConflict(SignoffError):
    """The journal already holds a step at this position."""

    def __init__(self, run_id: str, position: int) -> None:
        super().__init__(f"run {run_id} already has a step at position {position}")
        self.run_id = run_id
        self.position = position


class AttemptConflict(SignoffError):
    """The run already has a failed attempt with this number for the step at this position."""

    def __init__(self, run_id: str, position: int, attempt: int) -> None:
        super().__init__(
            f"run {run_id} already has attempt {attempt} of the step at position {position}"
        )
        self.run_id = run_id
        self.position = position
        self.attempt = attempt


class EventAlreadyDelivered(UserError):
    """An event with this key was already delivered to the run."""

    def __init__(self, run_id: str, key: str) -> None:
        super().__init__(f"event {key!r} was already delivered to run {run_id}")
        self.run_id = run_id
        self.key = key


class NonDeterminismError(SignoffError):
    """Replaying the workflow reached a step that differs from the journal at that position."""

    def __init__(self, position: int, expected: dict[str, Any], found: dict[str, Any]) -> None:
        super().__init__(
            f"non-deterministic workflow at step {position}: the journal has "
            f"{_describe(expected)} but the code now asks for {_describe(found)}"
            + _changed_input(position, expected, found)
        )
        self.position = position
        self.expected = expected
        self.found = found


class StepFailed(SignoffError):
    """A step failed on its last allowed attempt; the failure is journaled like a result."""

    def __init__(self, name: str, error_type: str, message: str, attempts: int) -> None:
        super().__init__(
            f"step {name!r} failed after {attempts} attempt(s): {error_type}: {message}"
        )
        self.name = name
        self.error_type = error_type
        self.message = message
        self.attempts = attempts


class StepTimeout(SignoffError):
    """A step attempt ran longer than its timeout."""

    retryable = True

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(f"step {name!r} timed out after {seconds:g}s")
        self.name = name
        self.seconds = seconds


class WaitTimedOut(SignoffError):
    """A durable wait for an event ended at its timeout with no event delivered."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no event {key!r} arrived before the timeout")
        self.key = key


class ApprovalNotFound(UserError):
    """No approval has the given id."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"no approval with id {approval_id}")
        self.approval_id = approval_id


class ApprovalNotPending(UserError):
    """The approval an operation depended on was decided or closed before it could happen."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"approval {approval_id} is no longer pending")
        self.approval_id = approval_id


class ModelError(SignoffError):
    """A model provider refused or failed a request; ``retry_after`` is the pause it asked
    for before the next try, if it named one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: timedelta | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


def _changed_input(position: int, expected: dict[str, Any], found: dict[str, Any]) -> str:
    """What to do when the same step was asked with another input: what it was built from
    changed since the run began (its code, or an agent's prompt, tools or settings)."""
    same = expected and all(expected.get(k) == found.get(k) for k in ("kind", "name"))
    if not same:
        return ""
    return (
        ": its input changed since the run began (the workflow's code, or the agent's system "
        "prompt, tools or settings); restore them and resume the run, or fork it at step "
        f"{position} (signoff fork RUN --at {position}) to go on under the new ones"
    )


def _describe(step: dict[str, Any]) -> str:
    if not step:
        return "nothing (the workflow ended)"
    return f"{step.get('kind')} {step.get('name')!r} (input {step.get('input_hash')})"


class GrantNotFound(UserError):
    """No grant has the given id."""

    def __init__(self, grant_id: str) -> None:
        super().__init__(f"no grant with id {grant_id}")
        self.grant_id = grant_id


class GrantRefused(UserError):
    """A grant cannot be made or revoked by this person, or for this approval."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

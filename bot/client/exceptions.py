"""Errors of the Signoff API client."""

from __future__ import annotations

from typing import Any


class SignoffClientError(Exception):
    """The approvals API could not be used as asked."""


class ApiRefused(SignoffClientError):
    """The API answered with an error status (a bad key: 401; no such approval: 404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class NotApproved(SignoffClientError):
    """The tool call was not approved: it must not be made."""

    def __init__(self, approval: dict[str, Any], message: str) -> None:
        super().__init__(message)
        self.approval = approval


class Rejected(NotApproved):
    """A person rejected the call (or its run was cancelled); ``reason`` says why."""

    @property
    def reason(self) -> str:
        """The reason given with the rejection."""
        return str(self.approval.get("reason") or "")


class Expired(NotApproved):
    """Nobody decided before the deadline: the call is refused (fail-closed)."""


class StillPending(SignoffClientError):
    """The client stopped waiting (its timeout) before anyone decided."""

    def __init__(self, approval_id: str) -> None:
        super().__init__(f"approval {approval_id} is still pending")
        self.approval_id = approval_id

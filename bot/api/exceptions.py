"""Errors of the approvals API, each with the HTTP status it is answered with."""

from __future__ import annotations

from agent_runtime.exceptions import SignoffError


class ApiError(SignoffError):
    """A request the API answers with an error status and a message."""

    status = "400 Bad Request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ApiError):
    """The request's body or parameters are not what the API takes."""


class Unauthorized(ApiError):
    """No key, an unknown key, or a revoked one."""

    status = "401 Unauthorized"


class NotFound(ApiError):
    """No such path, or no approval of this client with that id."""

    status = "404 Not Found"


class Conflict(ApiError):
    """The request cannot be taken in the state things are in (its run was cancelled)."""

    status = "409 Conflict"


class KeyNameTaken(SignoffError):
    """An API client of that name exists already."""


class RefusedDestination(BadRequest):
    """A callback URL that reaches an address webhooks may not go to; never retried."""

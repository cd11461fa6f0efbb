"""A Python client of Signoff's approvals API, for agents Signoff does not run."""

from bot.client.api import Approved, SignoffClient
from bot.client.decorator import approval_required
from bot.client.exceptions import (
    ApiRefused,
    Expired,
    NotApproved,
    Rejected,
    SignoffClientError,
    StillPending,
)

__all__ = [
    "ApiRefused",
    "Approved",
    "Expired",
    "NotApproved",
    "Rejected",
    "SignoffClient",
    "SignoffClientError",
    "StillPending",
    "approval_required",
]

"""``SignoffClient``: ask Signoff's approvals API for sign-off and wait for the decision."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import requests

from bot.client.exceptions import ApiRefused, Expired, Rejected, StillPending

WAIT_STEP = 30.0
"""Seconds one long poll asks the server to wait (the server caps it at 60)."""
RETRIES = 3
BUSY_PAUSE = 1.0
"""Seconds to pause when the server answered a long poll at once (too many waiting)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Approved:
    """An approved call: exactly the arguments to call the tool with (maybe edited)."""

    approval_id: str
    arguments: dict[str, Any]
    args_hash: str
    approver: dict[str, Any] | None
    decided_at: str | None


class SignoffClient:
    """A client of one Signoff server's approvals API, with one client's key."""

    def __init__(
        self, base_url: str, api_key: str, *, session: requests.Session | None = None
    ) -> None:
        self._base = base_url.rstrip("/")
        self._session = session or requests.Session()
        self._session.headers["Authorization"] = f"Bearer {api_key}"

    def request(self, tool: str, arguments: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """Ask for sign-off (``policy``, ``idempotency_key``, ``conversation_id``,
        ``callback_url``, ``channel`` as the API takes them); return the approval."""
        body = {
            "tool": tool,
            "arguments": arguments,
            **{k: v for k, v in fields.items() if v is not None},
        }
        return self._call("POST", "/v1/approvals", json=body)

    def get(self, approval_id: str, *, wait: float = 0) -> dict[str, Any]:
        """Return the approval, waiting up to ``wait`` seconds for its decision."""
        return self._call(
            "GET", f"/v1/approvals/{approval_id}", params={"wait": wait}, timeout=wait + 30
        )

    def require_approval(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        policy: dict[str, Any] | str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> Approved:
        """Ask for sign-off and wait for it: ``Approved``, else ``Rejected`` or ``Expired``;
        ``StillPending`` if ``timeout`` seconds pass first."""
        approval = self.request(
            tool,
            arguments,
            policy=policy,
            idempotency_key=idempotency_key or uuid.uuid4().hex,
            **fields,
        )
        ends = None if timeout is None else time.monotonic() + timeout
        while approval["status"] == "pending":
            left = WAIT_STEP if ends is None else min(WAIT_STEP, ends - time.monotonic())
            if left <= 0:
                raise StillPending(approval["id"])
            asked = time.monotonic()
            approval = self.get(approval["id"], wait=left)
            if approval["status"] == "pending" and time.monotonic() - asked < BUSY_PAUSE:
                time.sleep(BUSY_PAUSE)  # the server could not wait: poll again, gently
        return outcome(approval)

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("timeout", 30)
        for attempt in range(RETRIES):
            try:
                answer = self._session.request(method, self._base + path, **kwargs)
            except requests.ConnectionError:
                if attempt == RETRIES - 1:
                    raise
            else:
                if answer.status_code != 503 or attempt == RETRIES - 1:
                    return _body(answer)
            time.sleep(0.5 * 2**attempt)  # backing off before retrying
        raise AssertionError("unreachable")


def outcome(approval: dict[str, Any]) -> Approved:
    """Return the approved call, or raise why there is none."""
    status = approval["status"]
    if status == "approved":
        return Approved(
            approval_id=approval["id"],
            arguments=approval["approved_arguments"],
            args_hash=approval["approved_args_hash"],
            approver=approval["approver"],
            decided_at=approval["decided_at"],
        )
    if status == "expired":
        raise Expired(approval, f"approval {approval['id']} expired undecided")
    raise Rejected(
        approval,
        f"approval {approval['id']} was {status}: {approval.get('reason') or 'no reason given'}",
    )


def _body(answer: requests.Response) -> dict[str, Any]:
    try:
        data = answer.json()
    except ValueError:
        data = {"error": answer.text}
    if answer.status_code >= 400:
        raise ApiRefused(answer.status_code, str(data.get("error", "")))
    return dict(data)

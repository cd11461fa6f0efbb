"""The API client example against the approvals API served over loopback on SQLite."""

from pathlib import Path

from agent_runtime import Actor, ApprovalStatus, Decision
from bot.client import SignoffClient
from examples.api_client import REFUNDS, refunder
from tests.integration import wait_until
from tests.integration.api_server import ApiServer, Waiting, api_server


def _pending(api: ApiServer) -> str:
    """Wait for the refund's approval to be asked and return its id."""

    def found() -> str | None:
        pending = api.services.approvals.store.list_approvals(status=ApprovalStatus.PENDING)
        return pending[0].id if pending else None

    return wait_until(found, timeout=30, what="the refund's approval")


def test_the_refund_is_issued_as_edited_by_the_approver(tmp_path: Path) -> None:
    """The decorated refund waits; Dana lowers the amount; it runs once, with her amount."""
    with api_server(f"sqlite:///{tmp_path / 'signoff.db'}") as api:
        issue_refund = refunder(SignoffClient(api.url, api.client.key), ["U_DANA"])
        waiting = Waiting(lambda: issue_refund("1042", 4999))
        edited = {"order_id": "1042", "amount_cents": 2500}
        decided = api.services.approvals.decide(
            _pending(api), Actor(user_id="U_DANA"), Decision.EDIT, edited_args=edited
        )
        assert decided.accepted, decided.message
        assert waiting.result() == {"refunded": "1042", "amount_cents": 2500}
    assert REFUNDS == {"1042": 2500}

"""Agents Signoff does not run, signed off in Slack: the approvals API served over loopback
next to the real Bolt app, and people clicking the cards as Slack sends their clicks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_runtime import Approval, ApprovalStatus, SystemClock
from bot.api.http import api_app
from bot.api.keys import create_key
from bot.api.service import ApiApprovals
from bot.app.serving import serve_wsgi
from bot.client import SignoffClient
from bot.slack.blocks import APPROVE, EDIT, REJECT
from store.api_store import SqlApiStore
from tests.integration.api_server import not_found
from tests.integration.slack_harness import (
    APPROVER,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import canonical_args
from tests.integration.slack_steps import (
    acked,
)


class SlackSignoff:
    """A served approvals API whose approvals an approver decides by clicking in Slack."""

    def __init__(self, world: SlackWorld, bot: BotInstance, client: SignoffClient) -> None:
        self.world = world
        self.bot = bot
        self.client = client
        self.channel = world.channel
        self.approver = APPROVER

    def pending(self) -> Approval:
        """Wait for the one approval asked and its card in the channel; return it."""

        def asked() -> Approval | None:
            found = self.bot.services.approvals.store.list_approvals(status=ApprovalStatus.PENDING)
            return found[0] if found and self._has_card(found[0].id) else None

        return eventually(asked, between=self.bot.drain, timeout=30, what="the card in Slack")

    def approve(self, approval: Approval) -> Approval:
        """Click Approve on the approval's card as the approver; return the decision."""
        acked(self.bot.click(APPROVER, APPROVE, self.world.card(approval.id)))
        return self.bot.decision(approval.id)

    def edit(self, approval: Approval, arguments: dict[str, Any]) -> Approval:
        """Click Edit, submit ``arguments`` in the modal as the approver; return the decision."""
        acked(self.bot.click(APPROVER, EDIT, self.world.card(approval.id)))
        view = self.world.modal("approval.edit_submit", approval.id)
        acked(self.bot.submit(APPROVER, view, canonical_args(arguments)))
        return self.bot.decision(approval.id)

    def reject(self, approval: Approval, reason: str) -> Approval:
        """Click Reject, give ``reason`` in the modal as the approver; return the decision."""
        acked(self.bot.click(APPROVER, REJECT, self.world.card(approval.id)))
        view = self.world.modal("approval.reject_submit", approval.id)
        acked(self.bot.submit(APPROVER, view, reason))
        return self.bot.decision(approval.id)

    def _has_card(self, approval_id: str) -> bool:
        try:
            self.world.card(approval_id)
        except AssertionError:
            return False
        return True


@contextmanager
def slack_signoff(tmp_path: Path) -> Iterator[SlackSignoff]:
    """The fake Slack, one Signoff instance on a SQLite file, and its approvals API on a
    free loopback port with one client's key, until the block ends."""
    with SlackWorld(tmp_path, f"sqlite:///{tmp_path / 'signoff.db'}") as world:
        bot = world.instance()
        keys = SqlApiStore(bot.services.store.engine)
        key = create_key(keys, "agent", SystemClock().now())
        api = ApiApprovals(bot.services, keys)
        served = serve_wsgi(api_app(api, fallback=not_found), 0, "127.0.0.1", name="api", flag="-")
        with served as serving:
            client = SignoffClient(f"http://127.0.0.1:{serving.port}", key.key)
            yield SlackSignoff(world, bot, client)

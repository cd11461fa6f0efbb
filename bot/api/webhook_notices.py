"""The webhook notice a decided API approval causes, queued in the outbox with the decision."""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime import Approval, ApprovalStatus, Run, StepRecord
from agent_runtime.notices import Notice, Notifier
from bot.api.tools import PREFIX
from bot.api.views import view
from store import WEBHOOK, SqlApiStore


def webhook_key(approval_id: str) -> str:
    """The key of the webhook telling an approval's client of its decision."""
    return f"webhook:{approval_id}"


class WebhookNotifier:
    """Adds, to another notifier's notices, a webhook for each API approval decided whose
    client gave a callback URL."""

    def __init__(self, inner: Notifier, requests: SqlApiStore) -> None:
        self._inner = inner
        self._requests = requests

    def run_started(self, run: Run) -> Sequence[Notice]:
        """The inner notifier's notices."""
        return self._inner.run_started(run)

    def step_committed(self, run: Run, step: StepRecord) -> Sequence[Notice]:
        """The inner notifier's notices."""
        return self._inner.step_committed(run, step)

    def run_ended(self, run: Run) -> Sequence[Notice]:
        """The inner notifier's notices."""
        return self._inner.run_ended(run)

    def approval_changed(self, approval: Approval, action: str) -> Sequence[Notice]:
        """The inner notifier's notices, and the webhook once the approval is decided."""
        notices = list(self._inner.approval_changed(approval, action))
        if approval.status == ApprovalStatus.PENDING or not approval.tool.startswith(PREFIX):
            return notices
        request = self._requests.request_for(approval.id)
        if request is not None and request.callback_url:
            notices.append(
                Notice(
                    key=webhook_key(approval.id),
                    run_id=None,
                    kind=WEBHOOK,
                    data={
                        "client": request.client,
                        "url": request.callback_url,
                        "body": view(approval),
                    },
                )
            )
        return notices

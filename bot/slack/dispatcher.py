"""Delivers outbox notices to Slack: once each, in order per run, through outages and 429s.

Each notice is fenced: before every Slack call the dispatcher re-checks, in the database,
that its claim is still the latest and extends it; a dispatcher whose claim another has
taken never calls Slack for that notice again. A send that began but was never recorded
is uncertain: before posting it again the dispatcher looks for the message (by the
metadata every post carries). Transient failures back off and retry for as long as they
last; a 429 holds back its lane for ``Retry-After``; only Slack's definitive refusals end
a notice, with an error logged. Posts are paced per channel (``bot.slack.pacing``); a
refused bot token holds every call back and is logged as an error for the operator; a
refused channel ends the run and tells its requester (``bot.slack.channel_refusals``).
One notice failing in an unexpected way is logged and retried later; the batch goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime import (
    Approval,
    Approvals,
    ApprovalStatus,
    Clock,
    Run,
    RunId,
    RunNotFound,
    Store,
)
from agent_runtime.batches import pending_batch
from agent_runtime.exceptions import StoreUnavailable
from agent_runtime.notices import Delivery, Notice, Outbox, QueuedNotice
from bot.slack import blocks
from bot.slack.batch_blocks import batch_card
from bot.slack.budget_blocks import card_for
from bot.slack.delivery_errors import (
    TRANSPORT_ERRORS,
    backoff,
    describe,
    is_permanent,
    is_rate_limited,
    is_token_refused,
    is_transient,
    never_reached_slack,
    retry_after,
    slack_error,
)
from bot.slack.dispatch_options import DispatchOptions, sending_client
from bot.slack.grant_blocks import grant_message
from bot.slack.home import HOME
from bot.slack.notifier import (
    BATCH,
    CARD,
    CARD_UPDATE,
    DM,
    EPHEMERAL,
    GRANT,
    GRANT_UPDATE,
    REPLY,
    ROOT,
    ROOT_UPDATE,
    root_fields,
    root_key,
)
from bot.slack.pacing import ChannelPacing, Pace
from bot.slack.rate_limits import EVERYTHING, PER_CHANNEL, Lane, RateLimits
from bot.slack.run_status import status_line
from bot.slack.send_outcomes import (
    Held,
    IncompleteAnswer,
    LostClaim,
    NotReady,
    Undeliverable,
    delivery_of,
)
from bot.slack.sent_lookup import find_sent, metadata
from bot.slack.surfaces import HomeRefused, publish_home, set_thread_status
from bot.slack.workspaces import NotInstalled, OneWorkspace, WorkspaceClients
from store import HOME_REFRESH

logger = logging.getLogger(__name__)

T = TypeVar("T")

NOT_READY_DELAY = timedelta(milliseconds=500)
LIVE_APPROVALS = 500
"""The most recent approvals of a run its root message's status is drawn from (one read)."""
PLACES_KEPT = 10_000
"""How many delivered notices' places a dispatcher remembers."""


Live = tuple[Run, list[Approval], list[Approval]]
"""A run as it stands: the run, its pending and its approved approvals, oldest first."""

ChannelRefused = Callable[[Notice, str], None]
"""Told of a run's post that Slack refused for good, with Slack's error code."""


class Dispatcher:
    """Takes due notices from the outbox and sends them with the Slack Web API."""

    def __init__(
        self,
        outbox: Outbox,
        client: WebClient,
        approvals: Approvals,
        clock: Clock,
        owner: str,
        options: DispatchOptions | None = None,
        channel_refused: ChannelRefused | None = None,
        runs: Store | None = None,
        workspaces: WorkspaceClients | None = None,
    ) -> None:
        self._options = options or DispatchOptions()
        self._outbox = outbox
        self._workspaces = workspaces or OneWorkspace(client)
        self._clients: dict[str | None, WebClient] = {}
        # each workspace's token is looked up once a round (and so refreshed in time)
        self._round: dict[tuple[str, str], WebClient] = {}
        self._approvals = approvals
        self._clock = clock
        self._owner = owner
        self._limits = RateLimits()
        self._pacing = ChannelPacing(self._options.pace)
        self._channel_refused = channel_refused
        self._runs = runs  # without it, root messages show no live status
        # conversations.open answers the same IM id every time: one call per approver suffices
        self._dm_channels: dict[tuple[str, str, str], str] = {}
        self._landed: dict[str, Delivery] = {}

    def dispatch_once(self, limit: int | None = None) -> int:
        """Deliver what is due now; return how many notices were claimed."""
        now = self._clock.now()
        self._round.clear()
        items = self._outbox.claim_due(
            self._owner,
            now=now,
            until=now + self._options.pick_up,
            limit=limit or self._options.batch,
        )
        for item in items:
            if self._options.give_way is not None:
                self._options.give_way()
            self._contained(item)
        return len(items)

    def drain(self, rounds: int = 50) -> None:
        """Dispatch until nothing more is due (bounded)."""
        for _ in range(rounds):
            if not self.dispatch_once():
                return

    # -- one notice ------------------------------------------------------------------------

    def _contained(self, item: QueuedNotice) -> None:
        """Deliver ``item``; a failure nobody foresaw is logged and retried, and the batch
        goes on (a lost database stops it: every notice would fail alike)."""
        try:
            self._deliver(item)
        except StoreUnavailable:
            raise
        except Exception as exc:
            logger.exception(
                "delivering a notice failed unexpectedly",
                extra={"action": "dispatch", "run_id": item.notice.run_id, "key": item.notice.key},
            )
            until = self._clock.now() + backoff(item.attempts, self._options.backoff_cap)
            self._retry(item, until, f"unexpected: {type(exc).__name__}: {exc}", maybe_sent=True)

    def _deliver(self, item: QueuedNotice) -> None:
        try:
            delivery = self._send(item)
        except LostClaim:
            logger.info(
                "notice claimed by another dispatcher",
                extra={"action": "dispatch", "run_id": item.notice.run_id},
            )
        except NotReady:
            self._retry(item, self._clock.now() + NOT_READY_DELAY, "waits for an earlier message")
        except Held as held:
            self._retry(item, held.until, held.reason)
        except (Undeliverable, NotInstalled, HomeRefused) as exc:
            self._give_up(item, str(exc))
        except IncompleteAnswer as exc:
            logger.warning(
                "slack answered ok without the message; retrying",
                extra={"action": "dispatch", "run_id": item.notice.run_id, "key": item.notice.key},
            )
            self._retry(
                item,
                self._clock.now() + backoff(item.attempts, self._options.backoff_cap),
                str(exc),
                maybe_sent=True,
            )
        except SlackApiError as exc:
            self._refused(item, exc)
        except TRANSPORT_ERRORS as exc:
            self._unreachable(item, exc)
        else:
            self._record(item, delivery)

    def _refused(self, item: QueuedNotice, exc: SlackApiError) -> None:
        if is_permanent(exc):
            self._give_up(item, describe(exc))
            if self._channel_refused is not None and item.notice.kind in (ROOT, REPLY, CARD):
                self._channel_refused(item.notice, slack_error(exc) or "")
            return
        if is_token_refused(exc):
            self._token_refused(item, exc)
            return
        logger.warning(
            "slack failed a call; retrying",
            extra={"action": "dispatch", "run_id": item.notice.run_id, "error": describe(exc)},
        )
        self._retry(
            item,
            self._clock.now() + backoff(item.attempts, self._options.backoff_cap),
            describe(exc),
            maybe_sent=is_transient(exc),
        )

    def _token_refused(self, item: QueuedNotice, exc: SlackApiError) -> None:
        """Every call would fail alike: hold them all back, keep the notice, alert the operator."""
        until = self._clock.now() + backoff(item.attempts, self._options.backoff_cap)
        self._limits.hold(Lane(EVERYTHING), until)
        logger.error(
            "slack refused the bot token: check SLACK_BOT_TOKEN and the app's "
            "installation; notices wait",
            extra={"action": "dispatch", "run_id": item.notice.run_id, "error": describe(exc)},
        )
        self._retry(item, until, describe(exc))

    def _unreachable(self, item: QueuedNotice, exc: BaseException) -> None:
        until = self._clock.now() + backoff(item.attempts, self._options.backoff_cap)
        self._limits.hold(Lane(EVERYTHING), until)
        logger.warning(
            "slack unreachable; retrying",
            extra={"action": "dispatch", "run_id": item.notice.run_id, "error": describe(exc)},
        )
        self._retry(item, until, describe(exc), maybe_sent=not never_reached_slack(exc))

    def _retry(
        self, item: QueuedNotice, at: datetime, error: str, *, maybe_sent: bool = False
    ) -> None:
        # an earlier send still unaccounted for stays so until a lookup or a delivery settles it
        self._outbox.retry_later(item, at, error, maybe_sent=maybe_sent or item.uncertain)

    def _give_up(self, item: QueuedNotice, error: str) -> None:
        logger.error(
            "slack notice given up",
            extra={
                "action": "dispatch",
                "run_id": item.notice.run_id,
                "key": item.notice.key,
                "kind": item.notice.kind,
                "error": error,
            },
        )
        self._outbox.give_up(item, error)

    def _record(self, item: QueuedNotice, delivery: Delivery | None) -> None:
        """Record the delivery, once more on a fresh connection if the first one dropped."""
        try:
            recorded = self._outbox.delivered(item, delivery, self._clock.now())
        except StoreUnavailable:
            recorded = self._outbox.delivered(item, delivery, self._clock.now())
        if recorded and delivery is not None:
            self._remember(item.notice.key, delivery)
        if not recorded:
            logger.warning(
                "delivery recorded by another dispatcher",
                extra={"action": "dispatch", "run_id": item.notice.run_id},
            )

    # -- what each notice sends -------------------------------------------------------------

    def _send(self, item: QueuedNotice) -> Delivery | None:
        notice, data = item.notice, item.notice.data
        if notice.kind == ROOT:
            text, body = self._root(str(notice.run_id), data, self._live(str(notice.run_id)))
            return self._post(item, data["channel"], text, body)
        if notice.kind == ROOT_UPDATE:
            self._update_root(item, str(notice.run_id))
            return None
        if notice.kind == REPLY:
            root = self._depends_on(root_key(str(notice.run_id)))
            return self._post(item, root.channel, data["text"], None, thread_ts=root.ts)
        if notice.kind == CARD:
            root = self._depends_on(root_key(str(notice.run_id)))
            text, body = card_for(self._approvals.get(data["approval_id"]))
            return self._post(item, root.channel, text, body, thread_ts=root.ts)
        if notice.kind == BATCH:
            return self._batch(item, str(notice.run_id), int(data["before"]))
        if notice.kind == DM:
            return self._direct(item, data["user"], data["approval_id"])
        if notice.kind == CARD_UPDATE:
            self._update(item, data["target"], data["approval_id"])
            return None
        if notice.kind == GRANT:
            root = self._depends_on(root_key(str(notice.run_id)))
            text, body = grant_message(self._approvals.store.get_grant(data["grant_id"]))
            return self._post(item, root.channel, text, body, thread_ts=root.ts)
        if notice.kind == GRANT_UPDATE:
            posted = self._depends_on(data["target"])
            text, body = grant_message(self._approvals.store.get_grant(data["grant_id"]))
            self._call(
                item,
                Lane.of("chat.update", posted.channel),
                lambda: self._slack(item).chat_update(
                    channel=posted.channel, ts=posted.ts, text=text, blocks=body
                ),
            )
            return None
        if notice.kind in (HOME, HOME_REFRESH):
            self._publish_home(item)
            return None
        if notice.kind == EPHEMERAL:
            self._call(
                item,
                Lane.of("chat.postEphemeral", data["channel"]),
                lambda: self._slack(item).chat_postEphemeral(
                    channel=data["channel"],
                    user=data["user"],
                    text=data["text"],
                    blocks=data.get("blocks"),
                    thread_ts=data.get("thread_ts"),
                ),
            )
            return None
        raise ValueError(f"unknown notice kind {notice.kind!r}")

    def _depends_on(self, key: str) -> Delivery:
        """Where the notice ``key`` was delivered: remembered once read, as a sent notice's
        place never changes (a run's root is read by each of its later notices)."""
        found = self._landed.get(key) or self._outbox.delivery_of(key)
        if found is not None:
            self._remember(key, found)
            return found
        if self._outbox.is_dead(key):
            raise Undeliverable(f"depends on {key}, which could not be delivered")
        raise NotReady()

    def _remember(self, key: str, delivery: Delivery) -> None:
        if len(self._landed) >= PLACES_KEPT:
            self._landed.clear()
        self._landed[key] = delivery

    def _batch(self, item: QueuedNotice, run_id: str, before: int) -> Delivery | None:
        """Post "Approve all" under a turn's cards, if two or more of them still wait."""
        root = self._depends_on(root_key(run_id))
        if self._runs is None:
            return None
        journal = self._runs.load_journal(RunId(run_id))
        batch = pending_batch(self._approvals.store, run_id, journal, before)
        if len(batch) < 2:
            return None
        text, body = batch_card(before, batch)
        return self._post(item, root.channel, text, body, thread_ts=root.ts)

    def _direct(self, item: QueuedNotice, user: str, approval_id: str) -> Delivery:
        person = (item.notice.enterprise_id, item.notice.team_id, user)
        channel = self._dm_channels.get(person) or self._open_dm(item, person)
        text, body = card_for(self._approvals.get(approval_id))
        try:
            return self._post(item, channel, text, body)
        except SlackApiError:
            self._dm_channels.pop(person, None)  # asked again next time, in case it changed
            raise

    def _open_dm(self, item: QueuedNotice, person: tuple[str, str, str]) -> str:
        opened = self._call(
            item,
            Lane.of("conversations.open", None),
            lambda: self._slack(item).conversations_open(users=person[2]),
        )
        channel = str(opened["channel"]["id"])
        self._dm_channels[person] = channel
        return channel

    def _slack(self, item: QueuedNotice) -> WebClient:
        """The dispatcher's client for the notice's workspace (raises ``NotInstalled``)."""
        workspace = (item.notice.team_id, item.notice.enterprise_id)
        client = self._round.get(workspace)
        if client is None:
            found = self._workspaces.client_for(*workspace)
            client = self._clients.get(found.token)
            if client is None:
                client = self._clients[found.token] = sending_client(found, self._options)
            self._round[workspace] = client
        return client

    def _update(self, item: QueuedNotice, target: str, approval_id: str) -> None:
        card = self._depends_on(target)
        text, body = card_for(self._approvals.get(approval_id))
        self._call(
            item,
            Lane.of("chat.update", card.channel),
            lambda: self._slack(item).chat_update(
                channel=card.channel, ts=card.ts, text=text, blocks=body
            ),
        )

    @staticmethod
    def _root(
        run_id: str, fields: dict[str, Any], live: Live | None
    ) -> tuple[str, list[blocks.Block]]:
        """The root message as the run stands (``fields`` without a status, if unknown)."""
        status = None
        if live is not None:
            fields, status = root_fields(live[0]), status_line(*live)
        return blocks.run_root(
            run_id,
            fields["task"],
            fields["requester"],
            fields["agent"],
            fork=fields.get("fork"),
            status=status,
        )

    def _live(self, run_id: str) -> Live | None:
        """The run and its pending and approved approvals (oldest first), if it can be read."""
        if self._runs is None:
            return None
        try:
            run = self._runs.get_run(RunId(run_id))
        except RunNotFound:
            return None
        asked = self._approvals.store.list_approvals(run_id=run_id, limit=LIVE_APPROVALS)[::-1]
        return (
            run,
            [a for a in asked if a.status == ApprovalStatus.PENDING],
            [a for a in asked if a.status == ApprovalStatus.APPROVED],
        )

    def _update_root(self, item: QueuedNotice, run_id: str) -> None:
        root = self._depends_on(root_key(run_id))
        live = self._live(run_id)
        if live is None:
            return
        text, body = self._root(run_id, {}, live)
        self._call(
            item,
            Lane.of("chat.update", root.channel),
            lambda: self._slack(item).chat_update(
                channel=root.channel, ts=root.ts, text=text, blocks=body
            ),
        )
        if self._options.thread_status:
            self._call(
                item,
                Lane.of("assistant.threads.setStatus", None),
                lambda: set_thread_status(self._slack(item), root, live[0], live[1]),
            )

    def _publish_home(self, item: QueuedNotice) -> None:
        """Publish a person's tab, built only once the send has begun: a refresh the store
        kept waiting shows every change committed before then (``store.home_tabs``)."""
        if self._runs is None:
            return
        runs, store, now = self._runs, self._approvals.store, self._clock.now()
        self._call(
            item,
            Lane.of("views.publish", None),
            lambda: publish_home(self._slack(item), store, runs, item.notice.data, now),
        )

    def _post(
        self,
        item: QueuedNotice,
        channel: str,
        text: str,
        body: list[blocks.Block] | None,
        *,
        thread_ts: str | None = None,
    ) -> Delivery:
        if item.uncertain:
            method = "conversations.replies" if thread_ts else "conversations.history"
            found = self._call(
                item,
                Lane.of(method, channel),
                lambda: find_sent(
                    self._slack(item),
                    item.notice.key,
                    channel=channel,
                    thread_ts=thread_ts,
                    since=item.sending_since,
                ),
            )
            if found is not None:
                logger.info(
                    "notice found already posted",
                    extra={
                        "action": "dispatch",
                        "run_id": item.notice.run_id,
                        "key": item.notice.key,
                    },
                )
                return found
        response = self._call(
            item,
            Lane.of("chat.postMessage", channel),
            lambda: self._slack(item).chat_postMessage(
                channel=channel,
                text=text,
                blocks=body,
                thread_ts=thread_ts,
                unfurl_links=False,
                unfurl_media=False,
                metadata=metadata(item.notice.key),
            ),
        )
        return delivery_of(response.data)

    def _pace(self, item: QueuedNotice, lane: Lane, now: datetime) -> None:
        """Take a post slot in the lane's channel, or hold the call until its booked slot."""
        if lane.method not in PER_CHANNEL or lane.channel is None:
            return
        paced = self._pacing.slot(lane.channel, item.notice.key, now)
        if paced is not None:
            raise Held(paced, "paced: slack takes about one post a second per channel")

    def _call(self, item: QueuedNotice, lane: Lane, call: Callable[[], T]) -> T:
        """Make one Slack call for ``item``: not while its lane is held, only while its claim is
        the latest (extended for the call), and turning a 429 into a hold on the lane."""
        now = self._clock.now()
        held = self._limits.held_until(lane, now)
        if held is not None:
            raise Held(held, "waits for slack (rate limited or unreachable)")
        self._pace(item, lane, now)
        if not self._outbox.begin_send(item, now=now, until=now + self._options.claim_for):
            raise LostClaim()
        try:
            return call()
        except SlackApiError as exc:
            if self._options.on_refused is not None:
                self._options.on_refused(lane.method, exc)
            if not is_rate_limited(exc):
                raise
            until = now + retry_after(exc)
            self._limits.hold(lane, until)
            raise Held(until, describe(exc)) from exc


__all__ = [
    "ChannelRefused",
    "DispatchOptions",
    "Dispatcher",
    "NotReady",
    "Pace",
    "delivery_of",
    "sending_client",
]

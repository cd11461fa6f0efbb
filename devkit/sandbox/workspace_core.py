"""The core of the sandbox workspace: its state, people and channels, API log, faults, events.

``WorkspaceCore`` holds all of the workspace's state behind one lock, and the machinery every
part shares (ids, numbered change events, subscribers). ``MessagesMixin`` and ``ModalsMixin``
add messages and modals on top of it; ``devkit.sandbox.workspace.Workspace`` combines them.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from devkit.sandbox.records import (
    ApiCall,
    Channel,
    EphemeralMessage,
    EventKind,
    Fault,
    Message,
    SavedState,
    Trigger,
    User,
    View,
    WorkspaceError,
    WorkspaceEvent,
)

log = logging.getLogger(__name__)

DEFAULT_TRIGGER_TTL_S = 3.0


class WorkspaceCore:
    """The workspace's state and shared machinery, without messages and modals.

    Use ``devkit.sandbox.workspace.Workspace``; this base exists so the workspace's parts can live
    in their own modules.
    """

    def __init__(
        self,
        *,
        team_id: str = "T0SANDBOX",
        team_name: str = "Signoff Sandbox",
        domain: str = "signoff-sandbox",
        bot_user_id: str = "U0SIGNOFF",
        bot_name: str = "signoff",
        bot_id: str = "B0SIGNOFF",
        app_id: str = "A0SIGNOFF",
        permalink_base: str | None = None,
        trigger_ttl: float = DEFAULT_TRIGGER_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.team_id = team_id
        self.team_name = team_name
        self.domain = domain
        self.bot_id = bot_id
        self.app_id = app_id
        self.bot_user = User(bot_user_id, bot_name, bot_name, is_bot=True)
        self.permalink_base = (permalink_base or f"https://{domain}.slack.com").rstrip("/")
        self.trigger_ttl = trigger_ttl
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self._users: dict[str, User] = {self.bot_user.id: self.bot_user}
        self._channels: dict[str, Channel] = {}
        self._bot_channels: set[str] = set()
        self._archived: set[str] = set()
        self._ims: dict[str, str] = {}
        self._messages: dict[str, list[Message]] = {}
        self._ephemerals: list[EphemeralMessage] = []
        self._views: dict[str, View] = {}
        self._homes: dict[str, View] = {}
        self._thread_statuses: dict[tuple[str, str], str] = {}
        self.home_tab_enabled = True
        """Whether the app's Home tab is on (``views.publish`` of a home view says
        ``not_enabled`` otherwise, as Slack does)."""
        self._triggers: dict[str, Trigger] = {}
        self._calls: list[ApiCall] = []
        self._faults: dict[str, deque[Fault]] = {}
        self._limited_until = 0.0
        self._limited_retry_after = 1
        self._delay_s = 0.0
        self._gates: dict[str, threading.Event] = {}
        self._events: list[WorkspaceEvent] = []
        self._subscribers: list[Callable[[WorkspaceEvent], None]] = []
        self.add_channel("general", with_bot=True)

    @property
    def url(self) -> str:
        """Return the workspace URL ``auth.test`` reports."""
        return f"https://{self.domain}.slack.com/"

    # -- people and conversations ------------------------------------------------------------

    def add_user(
        self, name: str, *, real_name: str | None = None, user_id: str | None = None
    ) -> User:
        """Add a person (member of every public channel) and return them."""
        with self._lock:
            user = User(user_id or self._new_id("U"), name, real_name or name)
            if user.id in self._users:
                raise ValueError(f"user {user.id} already exists")
            self._users[user.id] = user
            event = self._event_locked("user_added", user)
        self._deliver(event)
        return user

    def add_channel(
        self, name: str, *, channel_id: str | None = None, with_bot: bool = False
    ) -> Channel:
        """Add a public channel; the bot is not in it (as in Slack) unless ``with_bot``."""
        with self._lock:
            name = name.lstrip("#")
            if any(c.name == name and not c.is_im for c in self._channels.values()):
                raise ValueError(f"channel #{name} already exists")
            channel = Channel(channel_id or self._new_id("C"), name, created=int(self._clock()))
            if channel.id in self._channels:
                raise ValueError(f"channel {channel.id} already exists")
            self._channels[channel.id] = channel
            self._messages[channel.id] = []
            if with_bot:
                self._bot_channels.add(channel.id)
            event = self._event_locked("channel_created", channel)
        self._deliver(event)
        return channel

    def user(self, user_id: str) -> User | None:
        """Return the user with this id, if any."""
        with self._lock:
            return self._users.get(user_id)

    def users(self) -> list[User]:
        """Return every user, the bot first."""
        with self._lock:
            return list(self._users.values())

    def channel(self, channel_id: str) -> Channel | None:
        """Return the channel (or IM) with this id, if any."""
        with self._lock:
            return self._channels.get(channel_id)

    def channels(self) -> list[Channel]:
        """Return every channel and IM, in creation order."""
        with self._lock:
            return list(self._channels.values())

    def open_im(self, user_id: str) -> Channel:
        """Return the bot's IM with a user, opening it the first time (same id every time)."""
        channel, event = self._open_im(user_id)
        if event is not None:
            self._deliver(event)
        return channel

    def _open_im(self, user_id: str) -> tuple[Channel, WorkspaceEvent | None]:
        with self._lock:
            user = self._users.get(user_id)
            if user is None or user.is_bot:
                raise WorkspaceError("user_not_found")
            existing = self._ims.get(user_id)
            if existing is not None:
                return self._channels[existing], None
            channel = Channel(
                self._new_id("D"), user.name, is_im=True, user=user_id, created=int(self._clock())
            )
            self._channels[channel.id] = channel
            self._messages[channel.id] = []
            self._ims[user_id] = channel.id
            return channel, self._event_locked("channel_created", channel)

    def resolve_channel(self, ref: str) -> Channel:
        """Find a channel as ``chat.postMessage`` does: id, name, ``#name`` or a user id (IM)."""
        with self._lock:
            if ref in self._channels:
                return self._channels[ref]
            name = ref.lstrip("#")
            for channel in self._channels.values():
                if not channel.is_im and channel.name == name:
                    return channel
            user = self._users.get(ref)
        if user is None or user.is_bot:
            raise WorkspaceError("channel_not_found")
        return self.open_im(ref)

    def invite_bot(self, channel_id: str) -> None:
        """Add the bot to a channel, as ``/invite @bot`` does."""
        with self._lock:
            self._bot_channels.add(channel_id)

    def remove_bot(self, channel_id: str) -> None:
        """Take the bot out of a channel, as ``/remove @bot`` does."""
        with self._lock:
            self._bot_channels.discard(channel_id)

    def archive(self, channel_id: str) -> None:
        """Archive a channel: nothing can be posted in it any more."""
        with self._lock:
            self._archived.add(channel_id)

    def check_bot_may_post(self, channel: Channel) -> None:
        """Refuse as Slack does a bot post where the bot cannot post: archived, or not invited.

        Raises WorkspaceError ``is_archived`` or ``not_in_channel``; the bot's IMs always work.
        """
        with self._lock:
            if channel.id in self._archived:
                raise WorkspaceError("is_archived")
            if not channel.is_im and channel.id not in self._bot_channels:
                raise WorkspaceError("not_in_channel")

    def is_member(self, channel_id: str, user_id: str) -> bool:
        """Return whether a user is in a channel: a person is in every public one and their
        own IM; the bot is in its IMs and the channels it was invited to."""
        with self._lock:
            channel = self._channels.get(channel_id)
            if channel is None or user_id not in self._users:
                return False
            if user_id == self.bot_user.id:
                return channel.is_im or channel.id in self._bot_channels
            return not channel.is_im or channel.user == user_id

    def is_archived(self, channel_id: str) -> bool:
        """Return whether the channel was archived."""
        with self._lock:
            return channel_id in self._archived

    # -- the API log and scripted faults ------------------------------------------------------

    def log_call(
        self, method: str, params: Mapping[str, Any], *, status: int, error: str | None
    ) -> ApiCall:
        """Record a request the API answered (the server calls this for every request)."""
        with self._lock:
            call = ApiCall(method, dict(params), self._clock(), status, error is None, error)
            self._calls.append(call)
            event = self._event_locked("api_call", call)
        self._deliver(event)
        return call

    def calls(self, method: str | None = None) -> list[ApiCall]:
        """Return the requests received, oldest first, optionally only those of one method."""
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def rate_limit(self, method: str, *, times: int = 1, retry_after: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` (``"*"``: any) with HTTP 429.

        The answer carries ``Retry-After: <retry_after>`` and ``{"ok": false, "error":
        "ratelimited"}``, as Slack's does.
        """
        self._add_fault(method, times, Fault("ratelimited", "ratelimited", 429, retry_after))

    def fail(self, method: str, error: str, *, times: int = 1, status: int = 200) -> None:
        """Answer the next ``times`` calls of ``method`` (``"*"``: any) with ``error``."""
        self._add_fault(method, times, Fault("error", error, status))

    def answer_bare(self, method: str, *, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": true}`` alone, doing
        nothing (what Slack's mock servers answer)."""
        self._add_fault(method, times, Fault("bare", "", 200))

    def answer_without_error(self, method: str, *, status: int = 500, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with ``{"ok": false}`` and no
        ``error`` field, with HTTP ``status``."""
        self._add_fault(method, times, Fault("no_error", "", status))

    def answer_html(self, method: str, *, status: int = 503, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with an HTML error page."""
        self._add_fault(method, times, Fault("html", "", status))

    def disconnect(self, method: str, *, times: int = 1) -> None:
        """Close the connection of the next ``times`` calls of ``method`` without answering."""
        self._add_fault(method, times, Fault("disconnect", "", 0))

    def warn(self, method: str, warning: str = "superfluous_charset", *, times: int = 1) -> None:
        """Do the next ``times`` calls of ``method`` and answer them with ``warning``."""
        self._add_fault(method, times, Fault("warning", warning, 200))

    def rate_limit_for(self, seconds: float, *, retry_after: int = 1) -> None:
        """Answer every call for the next ``seconds`` with HTTP 429 and ``Retry-After``."""
        with self._lock:
            self._limited_until = self._clock() + seconds
            self._limited_retry_after = retry_after

    def slow_down(self, seconds: float) -> None:
        """Answer every call ``seconds`` late (0: at once again), as a struggling Slack does."""
        with self._lock:
            self._delay_s = seconds

    def call_delay(self) -> float:
        """Return how late calls are answered now."""
        with self._lock:
            return self._delay_s

    def hold_answers(self, method: str) -> None:
        """Do the work of each later call of ``method`` but keep its answer until released."""
        with self._lock:
            self._gates[method] = threading.Event()

    def release_answers(self, method: str) -> None:
        """Send the answers held for ``method``, and hold no more."""
        with self._lock:
            gate = self._gates.pop(method, None)
        if gate is not None:
            gate.set()

    def wait_for_release(self, method: str) -> None:
        """Block the caller (a request's thread) while answers of ``method`` are held."""
        with self._lock:
            gate = self._gates.get(method)
        if gate is not None:
            gate.wait()

    def take_fault(self, method: str) -> Fault | None:
        """Consume and return the next scripted fault for a call of ``method``, if any."""
        with self._lock:
            if self._clock() < self._limited_until:
                return Fault("ratelimited", "ratelimited", 429, self._limited_retry_after)
            for key in (method, "*"):
                queue = self._faults.get(key)
                if queue:
                    return queue.popleft()
            return None

    def _add_fault(self, method: str, times: int, fault: Fault) -> None:
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._faults.setdefault(method, deque()).extend([fault] * times)

    # -- following changes -------------------------------------------------------------------

    def subscribe(self, callback: Callable[[WorkspaceEvent], None]) -> Callable[[], None]:
        """Call ``callback`` with every later event; return a function that unsubscribes.

        Callbacks run on the thread that made the change, after the workspace lock is released;
        they must be quick (hand the event to a queue). Their exceptions are logged.
        """
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def events(self, since: int = 0) -> list[WorkspaceEvent]:
        """Return the events numbered after ``since``."""
        with self._lock:
            return self._events[since:]

    def wait_for_events(self, since: int, timeout: float) -> list[WorkspaceEvent]:
        """Return the events after ``since``, waiting up to ``timeout`` s for one (long poll)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._events) > since, timeout)
            return self._events[since:]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate()`` (re-checked after each change) holds; False on timeout."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    # -- saving and loading ------------------------------------------------------------------

    def saved_state(self) -> SavedState:
        """Return what outlives a restart: people, channels, messages, ephemerals."""
        with self._lock:
            next_id = next(self._ids)
            self._ids = itertools.count(next_id)  # saving uses up no id
            return SavedState(
                users=list(self._users.values()),
                channels=list(self._channels.values()),
                bot_channels=sorted(self._bot_channels),
                archived=sorted(self._archived),
                messages=[m for ms in self._messages.values() for m in ms],
                ephemerals=list(self._ephemerals),
                next_id=next_id,
                last_ts_us=self._last_ts_us,
            )

    def restore(self, state: SavedState) -> None:
        """Replace people, channels, messages and ephemerals with ``state`` (before serving)."""
        with self._lock:
            self._users = {u.id: u for u in state.users}
            self._users.setdefault(self.bot_user.id, self.bot_user)
            self._channels = {c.id: c for c in state.channels}
            self._ims = {c.user: c.id for c in state.channels if c.is_im and c.user}
            self._bot_channels, self._archived = set(state.bot_channels), set(state.archived)
            self._messages = {c.id: [] for c in state.channels}
            for message in state.messages:
                self._messages.setdefault(message.channel, []).append(message)
            self._ephemerals = list(state.ephemerals)
            self._ids = itertools.count(state.next_id)
            self._last_ts_us = max(self._last_ts_us, state.last_ts_us)

    # -- internals ---------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):08X}"

    def _event_locked(
        self, kind: EventKind, subject: Message | EphemeralMessage | View | Channel | User | ApiCall
    ) -> WorkspaceEvent:
        event = WorkspaceEvent(len(self._events) + 1, kind, self._clock(), subject)
        self._events.append(event)
        self._changed.notify_all()
        return event

    def _deliver(self, event: WorkspaceEvent) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(event)
            except Exception:
                log.exception("workspace subscriber failed on event %s", event.kind)

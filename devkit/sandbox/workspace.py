"""The sandbox workspace: a Slack workspace in memory, assembled from its parts."""

from __future__ import annotations

from devkit.sandbox.messages import MessagesMixin
from devkit.sandbox.modals import ModalsMixin
from devkit.sandbox.surfaces import SurfacesMixin


class Workspace(MessagesMixin, ModalsMixin, SurfacesMixin):
    """A Slack workspace in memory: the bot, people, channels, messages, modals,
    Home tabs and thread statuses.

    Every method is thread-safe. Records come back as immutable snapshots. Changes are
    numbered events: ``events(since)`` / ``wait_for_events(since)`` for polling (a browser UI),
    ``subscribe(callback)`` for push, ``wait_for(predicate)`` for tests. A fresh workspace has
    the bot user and a ``#general`` channel.
    """

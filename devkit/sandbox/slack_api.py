"""A local Slack Web API: an in-memory workspace, served over loopback HTTP like slack.com/api.

The real ``slack_sdk.WebClient`` talks to it unchanged: point ``base_url`` at ``<url>/api/``.
Three layers, usable on their own:

- ``Workspace``: the thread-safe model (team, bot, users, channels and IMs, messages with their
  edit history, ephemeral messages, modals, trigger ids, the log of API calls, injected faults)
  with subscribe/wait hooks so a browser UI can follow it live.
- ``SlackWebApi``: Slack's Web API conventions over a workspace, independent of any transport:
  bearer-token auth, ``{"ok": ...}`` bodies, Slack's error codes, Block Kit limits, HTTP 429 with
  ``Retry-After`` for injected rate limits.
- ``start_slack_api()``: a WSGI app (``bot.app.serving``) answering ``POST /api/<method>`` (form,
  multipart or JSON bodies; GET with a query string too) in a background thread.

How slack_sdk 3.x sends each method (the server accepts every form for every method):
``chat.postMessage``, ``chat.update``, ``chat.postEphemeral`` and ``views.*`` are JSON bodies
(blocks and views as nested JSON); ``auth.test`` and ``conversations.open`` are form bodies;
``users.info`` and ``chat.getPermalink`` put their arguments in the query string. The token is in
``Authorization: Bearer``; a ``token`` argument is accepted as Slack does.

This module re-exports the public API of the modules that implement it: ``records`` (the
immutable records and ``WorkspaceError``), ``blockkit`` (Block Kit validation), ``workspace``
(``Workspace``, built from ``workspace_core``, ``messages`` and ``modals``), ``web_api``
(``SlackWebApi`` and request decoding) and ``server`` (the HTTP server).
"""

from devkit.sandbox.blockkit import (
    MAX_MESSAGE_BLOCKS,
    MAX_MODAL_BLOCKS,
    validate_message_blocks,
    validate_modal,
)
from devkit.sandbox.messages import MAX_MESSAGE_TEXT
from devkit.sandbox.modals import MAX_VIEW_BYTES, MAX_VIEW_STACK
from devkit.sandbox.records import (
    ApiCall,
    Channel,
    EphemeralMessage,
    EventKind,
    Fault,
    JsonObject,
    Message,
    MessageRevision,
    Trigger,
    User,
    View,
    WorkspaceError,
    WorkspaceEvent,
)
from devkit.sandbox.server import API_PREFIX, RunningSlackApi, start_slack_api
from devkit.sandbox.web_api import (
    DEFAULT_TOKEN,
    ApiResponse,
    Handler,
    SlackWebApi,
    bearer_token,
    parse_request,
)
from devkit.sandbox.workspace import Workspace
from devkit.sandbox.workspace_core import DEFAULT_TRIGGER_TTL_S

__all__ = [
    "API_PREFIX",
    "DEFAULT_TOKEN",
    "DEFAULT_TRIGGER_TTL_S",
    "MAX_MESSAGE_BLOCKS",
    "MAX_MESSAGE_TEXT",
    "MAX_MODAL_BLOCKS",
    "MAX_VIEW_BYTES",
    "MAX_VIEW_STACK",
    "ApiCall",
    "ApiResponse",
    "Channel",
    "EphemeralMessage",
    "EventKind",
    "Fault",
    "Handler",
    "JsonObject",
    "Message",
    "MessageRevision",
    "RunningSlackApi",
    "SlackWebApi",
    "Trigger",
    "User",
    "View",
    "Workspace",
    "WorkspaceError",
    "WorkspaceEvent",
    "bearer_token",
    "parse_request",
    "start_slack_api",
    "validate_message_blocks",
    "validate_modal",
]

"""The sandbox Slack Web API over HTTP: a WSGI app served in a background thread."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from slack_sdk import WebClient

from bot.app.request_hygiene import WSGIApp
from bot.app.serving import DropConnection, ServingThread, bind_wsgi, status_line
from bot.slack.scopes import BOT_SCOPES
from devkit.sandbox.web_api import DEFAULT_TOKEN, ApiResponse, SlackWebApi
from devkit.sandbox.workspace import Workspace

API_PREFIX = "/api/"
JSON_TYPE = "application/json; charset=utf-8"


def slack_api_app(api: SlackWebApi) -> WSGIApp:
    """A WSGI app answering ``/api/<method>`` from ``api``; everything else is a 404."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(API_PREFIX) or len(path) == len(API_PREFIX):
            return _send(ApiResponse(404, {"ok": False, "error": "not_found"}), start_response)
        response = api.handle_http(
            path[len(API_PREFIX) :],
            content_type=environ.get("CONTENT_TYPE"),
            body=request_body(environ),
            query=environ.get("QUERY_STRING", ""),
            authorization=environ.get("HTTP_AUTHORIZATION"),
        )
        return _send(response, start_response)

    return application


def request_body(environ: dict[str, Any]) -> bytes:
    """Return the request's body (empty without a ``Content-Length``)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return b""
    return environ["wsgi.input"].read(length) if length > 0 else b""


def _send(response: ApiResponse, start_response: Callable[..., Any]) -> list[bytes]:
    if response.dropped:
        raise DropConnection
    if response.html is not None:
        data, content_type = response.html.encode("utf-8"), "text/html"
    else:
        data, content_type = json.dumps(response.body).encode("utf-8"), JSON_TYPE
    headers = [("Content-Type", content_type), ("Content-Length", str(len(data)))]
    start_response(status_line(response.status), [*headers, *response.headers.items()])
    return [data]


class RunningSlackApi(ServingThread):
    """A Slack Web API serving in a background thread; ``stop()`` (or ``with``) ends it."""

    def __init__(self, api: SlackWebApi, host: str, port: int, token: str) -> None:
        self._api = api
        self._host = host
        self.token = token
        super().__init__(bind_wsgi(slack_api_app(api), port, host), "sandbox-slack-api")
        self._port = self.port

    def go_offline(self) -> None:
        """Close the listening socket: every call is refused until ``go_online()``."""
        self.stop()

    def go_online(self) -> None:
        """Listen again, on the same port, serving the same API."""
        if not self.stopped:
            return
        self.serve(bind_wsgi(slack_api_app(self._api), self._port, self._host))

    @property
    def url(self) -> str:
        """Return the server's base URL, e.g. ``http://127.0.0.1:8765`` (no trailing slash)."""
        return f"http://{self._host}:{self.port}"

    @property
    def api_url(self) -> str:
        """Return the ``base_url`` for ``WebClient``: ``<url>/api/`` (trailing slash needed)."""
        return self.url + API_PREFIX

    @property
    def api(self) -> SlackWebApi:
        """Return the transport-independent API it serves."""
        return self._api

    @property
    def workspace(self) -> Workspace:
        """Return the workspace it serves."""
        return self._api.workspace

    def client(self, **kwargs: Any) -> WebClient:
        """Return a ``slack_sdk.WebClient`` for this server (keyword arguments pass through)."""
        kwargs.setdefault("token", self.token)
        return WebClient(base_url=self.api_url, **kwargs)


def start_slack_api(
    workspace: Workspace | None = None,
    *,
    port: int = 0,
    token: str = DEFAULT_TOKEN,
    host: str = "127.0.0.1",
    scopes: Iterable[str] = BOT_SCOPES,
) -> RunningSlackApi:
    """Serve a workspace (a fresh one by default) as the Slack Web API in a background thread.

    Port 0 picks a free port. Requests must carry ``token`` (``Authorization: Bearer``), which
    was granted ``scopes``.
    """
    api = SlackWebApi(
        workspace if workspace is not None else Workspace(), tokens=(token,), scopes=scopes
    )
    return RunningSlackApi(api, host, port, token)


def start_api(api: SlackWebApi, *, port: int = 0, host: str = "127.0.0.1") -> RunningSlackApi:
    """Serve ``api`` (several workspaces, say) in a background thread; port 0 picks one."""
    return RunningSlackApi(api, host, port, "")

"""The Slack app (Bolt, over ``bot.app.server.wsgi``) served on a loopback port in a thread."""

from __future__ import annotations

from bot.app.request_hygiene import WSGIApp
from bot.app.serving import ServingThread, bind_wsgi

EVENTS_PATH = "/slack/events"


class RunningApp(ServingThread):
    """A WSGI app serving in a background thread; ``stop()`` ends it."""

    def __init__(self, application: WSGIApp, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = bind_wsgi(application, port, host)
        super().__init__(self._server, "signoff-dev-app", poll_interval=0.1)

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:40123``."""
        return self._server.url

    @property
    def request_url(self) -> str:
        """Return the Slack request URL: ``<url>/slack/events``."""
        return self.url + EVENTS_PATH

"""The approvals API served in-process over loopback, on a real database, with one client."""

from __future__ import annotations

import ipaddress
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests

from agent_runtime import SystemClock
from bot.api.http import api_app
from bot.api.keys import NewKey, create_key
from bot.api.service import WAITERS, ApiApprovals
from bot.app.serving import serve_wsgi
from bot.app.settings import DEMO_APPROVERS, Settings
from bot.app.wiring import Services, build_services
from store.api_store import SqlApiStore
from tests.integration import signoff_env
from tests.integration.webhook_receiver import LOOPBACK


class Waiting(threading.Thread):
    """Calls ``call`` on its own thread and keeps what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._target_call = call
        self.outcome: Any = None
        self.start()

    def run(self) -> None:
        """Make the call."""
        try:
            self.outcome = self._target_call()
        except Exception as exc:  # the test inspects what was raised
            self.outcome = exc

    def result(self) -> Any:
        """Wait for the call to end and return its outcome."""
        self.join(60)
        assert not self.is_alive()
        return self.outcome


@dataclass(frozen=True, slots=True)
class ApiServer:
    """A served approvals API: its URL, its services, and the key of a first client."""

    url: str
    services: Services
    keys: SqlApiStore
    client: NewKey
    env: dict[str, str]
    """The environment of a ``signoff`` subprocess on the same database."""
    api: ApiApprovals

    def new_client(self) -> NewKey:
        """Create another client (names are unique across a shared database)."""
        return create_key(self.keys, f"client-{uuid.uuid4().hex[:8]}", SystemClock().now())

    def post(self, body: dict[str, Any], key: str | None = None) -> requests.Response:
        """POST ``body`` to ``/v1/approvals`` with ``key`` (default: the first client's)."""
        return requests.post(
            f"{self.url}/v1/approvals", json=body, timeout=30, headers=_auth(key or self.client.key)
        )

    def get(self, approval_id: str, wait: float = 0, key: str | None = None) -> requests.Response:
        """GET the approval, waiting up to ``wait`` seconds."""
        return requests.get(
            f"{self.url}/v1/approvals/{approval_id}",
            params={"wait": wait},
            headers=_auth(key or self.client.key),
            timeout=wait + 30,
        )


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def not_found(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """Answer 404 to anything the approvals API does not answer."""
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found\n"]


@contextmanager
def api_server(
    database_url: str, *, waiters: int = WAITERS, policies: str = "", allowed: str = LOOPBACK
) -> Iterator[ApiServer]:
    """Serve the approvals API (under the policy file ``policies``, if named) on a free
    loopback port until the block ends; webhooks may reach the ``allowed`` networks."""
    networks = {"SIGNOFF_WEBHOOK_ALLOWED_NETWORKS": allowed}
    settings = Settings(
        database_url=database_url,
        api_policies=policies,
        approvers=DEMO_APPROVERS,
        webhook_networks=tuple(ipaddress.ip_network(n) for n in allowed.split(",") if n),
    )
    services = build_services(settings)
    keys = SqlApiStore(services.store.engine)
    client = create_key(keys, f"client-{uuid.uuid4().hex[:8]}", SystemClock().now())
    api = ApiApprovals(services, keys, waiters=waiters)
    application = api_app(api, fallback=not_found)
    with serve_wsgi(application, 0, "127.0.0.1", name="api", flag="port") as serving:
        yield ApiServer(
            url=f"http://127.0.0.1:{serving.port}",
            services=services,
            keys=keys,
            client=client,
            env=signoff_env(database_url, extra=networks),
            api=api,
        )
    services.store.engine.dispose()

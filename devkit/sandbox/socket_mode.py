"""A local Slack Socket Mode endpoint: a WebSocket server on loopback speaking Slack's envelopes.

Slack's Socket Mode works in two steps, both modelled here:

1. the app calls ``apps.connections.open`` with its app-level (``xapp-``) token and gets a
   one-time ``wss://`` URL (here a ``ws://`` URL on loopback, see ``SlackWebApi``);
2. the app opens a WebSocket there; Slack sends ``{"type": "hello", ...}``, then one envelope
   per request (``slash_commands``, ``interactive``, ``events_api``), each with an
   ``envelope_id`` that the app must acknowledge by sending ``{"envelope_id": ..., "payload":
   ...}`` back within 3 seconds.

``SocketModeEndpoint.send()`` puts an envelope on every open connection's way (the first one
open, as Slack picks one) and ``acked()`` waits for its acknowledgement; ``drop()`` closes
every connection abruptly, as a network failure or a Slack-side restart does, so that a client
must reconnect through ``apps.connections.open``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from devkit.sandbox.records import JsonObject

log = logging.getLogger(__name__)

ENVELOPE_TYPES = ("slash_commands", "interactive", "events_api")
"""The envelope types Slack sends an app (``hello`` and ``disconnect`` are control messages)."""


class SocketModeTimeout(Exception):
    """An envelope was not acknowledged, or no connection opened, in the time given."""


@dataclass
class _Client:
    """One open WebSocket: its socket, its protocol state, a lock for writes."""

    sock: socket.socket
    ws: WSConnection
    ticket: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    parts: list[str] = field(default_factory=list)

    def send(self, event: Any) -> None:
        with self.lock:
            self.sock.sendall(self.ws.send(event))


class SocketModeEndpoint:
    """The WebSocket side of Socket Mode, serving in background threads until ``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._listener = socket.create_server((host, port), reuse_port=False)
        self._host = host
        self._port = int(self._listener.getsockname()[1])
        self._lock = threading.Condition()
        self._tickets: set[str] = set()
        self._clients: list[_Client] = []
        self._acks: dict[str, JsonObject] = {}
        self.hellos = 0
        """How many connections were opened and greeted so far (a reconnect adds one)."""
        self._stopped = False
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="sandbox-socket-mode", daemon=True
        )
        self._acceptor.start()

    # -- what apps.connections.open hands out --------------------------------------------------

    def new_url(self) -> str:
        """Return a fresh one-time URL to connect to (as ``apps.connections.open`` does)."""
        ticket = uuid.uuid4().hex
        with self._lock:
            self._tickets.add(ticket)
        return f"ws://{self._host}:{self._port}/link/?ticket={ticket}"

    # -- what the test or the sandbox does -------------------------------------------------------

    def wait_connected(self, hellos: int = 1, timeout: float = 30.0) -> None:
        """Wait until ``hellos`` connections have been greeted in all, one still open."""
        self._wait(lambda: self.hellos >= hellos and bool(self._clients), timeout, "a connection")

    def send(
        self, envelope_type: str, payload: JsonObject, *, accepts_response_payload: bool = True
    ) -> str:
        """Send one envelope on the oldest open connection; return its ``envelope_id``."""
        if envelope_type not in ENVELOPE_TYPES:
            raise ValueError(f"unknown envelope type {envelope_type!r}")
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": envelope_type,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }
        if envelope_type == "events_api":
            envelope.update(retry_attempt=0, retry_reason="")  # as Slack sends events
        self._oldest().send(TextMessage(data=json.dumps(envelope)))
        return envelope_id

    def acked(self, envelope_id: str, timeout: float = 10.0) -> JsonObject:
        """Wait for the app's acknowledgement of ``envelope_id``; return its ``payload``."""
        self._wait(lambda: envelope_id in self._acks, timeout, f"the ack of {envelope_id}")
        with self._lock:
            ack = self._acks[envelope_id]
        log.debug("sandbox Socket Mode ack: %s", ack)
        payload = ack.get("payload")
        return payload if isinstance(payload, dict) else {}

    def drop(self) -> int:
        """Close every open connection without a closing handshake; return how many."""
        with self._lock:
            dropped, self._clients = self._clients, []
        for client in dropped:
            _close_quietly(client.sock)
        return len(dropped)

    @property
    def open_connections(self) -> int:
        """Return how many connections are open now."""
        with self._lock:
            return len(self._clients)

    def stop(self) -> None:
        """Stop listening and close every connection."""
        self._stopped = True
        _close_quietly(self._listener)
        self.drop()
        self._acceptor.join(timeout=5)

    def __enter__(self) -> SocketModeEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the server -----------------------------------------------------------------------------

    def _oldest(self) -> _Client:
        self._wait(lambda: bool(self._clients), 10.0, "an open connection")
        with self._lock:
            return self._clients[0]

    def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SocketModeTimeout(f"no {what} within {timeout:g}s")
                self._lock.wait(left)

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._serve, args=(sock,), name="sandbox-socket-conn", daemon=True
            ).start()

    def _serve(self, sock: socket.socket) -> None:
        client = _Client(sock, WSConnection(ConnectionType.SERVER), ticket="")
        try:
            while True:
                data = sock.recv(65536)
                client.ws.receive_data(data or None)
                if not self._handle_events(client) or not data:
                    return
        except OSError:
            return
        finally:
            self._forget(client)

    def _handle_events(self, client: _Client) -> bool:
        """Handle what arrived; False once the connection is over."""
        for event in client.ws.events():
            if isinstance(event, Request):
                if not self._open(client, event):
                    return False
            elif isinstance(event, TextMessage):
                client.parts.append(event.data)
                if event.message_finished:
                    self._receive("".join(client.parts))
                    client.parts.clear()
            elif isinstance(event, BytesMessage):
                log.warning("sandbox Socket Mode: a binary message, ignored")
            elif isinstance(event, Ping):
                client.send(event.response())
            elif isinstance(event, CloseConnection):
                if client.ws.state == ConnectionState.REMOTE_CLOSING:
                    client.send(event.response())
                return False
        return True

    def _open(self, client: _Client, request: Request) -> bool:
        ticket = request.target.partition("ticket=")[2]
        with self._lock:
            valid = ticket in self._tickets
            self._tickets.discard(ticket)
        if not valid:
            client.send(RejectConnection(status_code=401))
            return False
        client.ticket = ticket
        client.send(AcceptConnection())
        hello = {
            "type": "hello",
            "num_connections": 1,
            "debug_info": {"host": "sandbox", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0SANDBOX"},
        }
        client.send(TextMessage(data=json.dumps(hello)))
        with self._lock:
            self._clients.append(client)
            self.hellos += 1
            self._lock.notify_all()
        return True

    def _receive(self, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            log.warning("sandbox Socket Mode: a message that is not JSON")
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        if isinstance(envelope_id, str):
            with self._lock:
                self._acks[envelope_id] = message
                self._lock.notify_all()

    def _forget(self, client: _Client) -> None:
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)
            self._lock.notify_all()
        _close_quietly(client.sock)


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


__all__ = ["ENVELOPE_TYPES", "SocketModeEndpoint", "SocketModeTimeout"]

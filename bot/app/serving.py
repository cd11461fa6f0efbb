"""A socket server serving on a background thread: the shape of every local server here."""

from __future__ import annotations

import socketserver
import threading
from types import TracebackType
from typing import Self


class ServingThread:
    """Serves ``server`` on a daemon thread until ``stop()`` (or the end of a ``with``)."""

    def __init__(
        self, server: socketserver.TCPServer, name: str, *, poll_interval: float = 0.05
    ) -> None:
        self._name = name
        self._poll_interval = poll_interval
        self.serve(server)

    def serve(self, server: socketserver.TCPServer) -> None:
        """Serve ``server`` on a new thread (again, after ``stop()``, with a new server)."""
        self._socket_server = server
        self.stopped = False
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": self._poll_interval},
            name=f"{self._name}-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """Return the port it listens on."""
        return int(self._socket_server.server_address[1])

    def stop(self) -> None:
        """Stop accepting, wait for the serving thread and close the socket (idempotent)."""
        if self.stopped:
            return
        self.stopped = True
        self._socket_server.shutdown()
        self._thread.join()
        self._socket_server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

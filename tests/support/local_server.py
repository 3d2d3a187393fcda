"""What the fakes' HTTP servers share: a threaded server on a local port that knows its open
connections, served from a daemon thread, started and stopped (or used with ``with``) the same
way; stopping also drops the keep-alive connections a handler still waits on."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class LocalHTTPServer(ThreadingHTTPServer):
    """A threaded HTTP server that keeps the connections it serves, to drop them at the end."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.open_sockets: set[socket.socket] = set()
        self.lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.open_sockets.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Unblock the handlers waiting on a keep-alive connection for a next request."""
        with self.lock:
            sockets = list(self.open_sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class LocalServer:
    """A fake served from a daemon thread: :meth:`start` (or ``with``) serves the server that
    :meth:`open_server` builds, :meth:`stop` wakes what the fake's handlers wait on
    (:meth:`wake`), ends the server and drops its connections."""

    def __init__(self) -> None:
        self._server: LocalHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def open_server(self) -> LocalHTTPServer:
        """The server to serve, the fake ready to answer again (its stop flags cleared)."""
        raise NotImplementedError

    def wake(self) -> None:
        """Wake the fake's handlers that sleep or wait, so that the server can stop."""

    def start(self) -> Self:
        if self._server is not None:
            return self
        self._server = self.open_server()
        port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.wake()
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

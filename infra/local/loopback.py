"""Owns what the local stand-ins' HTTP servers share (the Bedrock emulator, the Twilio stand-in, the
local AppConfig, the S3 Vectors stand-in): a threaded server on a thread of its own, its URL,
starting and stopping it, and a JSON answer."""

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# How often a serving loop looks whether it should stop: short, so a stopped stand-in is gone at once.
POLL_S = 0.05


class StandInServer(ThreadingHTTPServer):
    """The server of a stand-in; its handlers reach the stand-in as `self.server.stand_in`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], stand_in: Any) -> None:
        # Before the bind: a port that is taken closes the server (server_close) inside __init__.
        self._connections: set[socket.socket] = set()  # accepted and not yet closed
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)
        self.stand_in = stand_in

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """The listening socket, and every connection a client keeps alive: its handler thread then
        reads the end of it, and closes it. Closing the listening socket alone left each stopped
        stand-in's connections open, both ends in a test's process, hundreds by the end of a run."""
        super().server_close()
        with self._connections_lock:
            still_open = list(self._connections)
        for connection in still_open:
            with contextlib.suppress(OSError):  # closed meanwhile by its handler
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a cancelled stream, a closed tab) is the client's
        business, as it is to AWS: nothing to print. Anything else keeps its traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...
            super().handle_error(request, client_address)


class LoopbackService:
    """A stand-in served on a thread: `with Service() as service:` (or start/stop), then `service.url`."""

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self._server = StandInServer((host, port), handler, self)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_S,), name=name, daemon=True)

    @property
    def port(self) -> int:
        """The port its socket is bound to (the one the system chose, when it was given 0)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        reachable = "127.0.0.1" if host == "0.0.0.0" else host  # noqa: S104 - only compared, never bound here
        return f"http://{reachable!s}:{self.port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever, which a server never started never runs
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def send_json(
    handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: Mapping[str, str] | None = None
) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)

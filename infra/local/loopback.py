"""Owns what the local stand-ins' HTTP servers share (the Bedrock emulator, the Twilio stand-in, the
local AppConfig): a threaded server on a thread of its own, its URL, starting and stopping it, and
a JSON answer."""

import json
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
        super().__init__(address, handler)
        self.stand_in = stand_in

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

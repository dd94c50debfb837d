"""A small TCP proxy in front of a local server, for fault tests over real sockets.

Modes, switchable while it runs:
- `pass`: bytes flow both ways unchanged;
- `refuse`: a new connection is accepted and reset at once (the client sees a refused or reset
  connection before it sent anything that could land);
- `drop_response`: the request reaches the server, whose answer is thrown away and the client's
  connection closed: the write landed, the client never hears so (a lost response);
- `stall`: the connection is accepted and the request read, and nothing ever comes back.

`drop_next(n)` drops the next `n` responses and passes the rest; `drop_when(marker, n)` drops the
responses of the next `n` requests whose bytes contain `marker` (a request carrying a given
operation or item), so a test loses exactly the answer it means to; `cut_when(marker, n)` cuts the
connection of the next `n` such requests before they reach the server (nothing lands);
`stall_when(marker, n)` holds the next `n` such requests: they never reach the server and no answer
comes (the client waits out its read timeout). `hold_when(marker)` holds the next such request
until the test calls `release()`, then lets it reach the server and its answer come back: `held` is
an event the test waits on, so a test orders "the request is on the wire", "something else
happens", "the request lands" by events, not by racing a client's timeout. `delay_s` holds every
request that long before it reaches the server (a slow network: a caller that blocks on it is held
that long). `chaos(rng, rate)` faults a share of requests at random (a seeded `random.Random`):
each request, with probability `rate`, is reset before it reaches the server, loses its answer
after the server applied it, or is stalled 0.5 to 3 s; `faults` counts each kind. Only loopback
addresses are used.
"""

import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Literal

Mode = Literal["pass", "refuse", "drop_response", "stall"]
Fault = Literal["reset", "lose", "stall"]
# The first bytes of an HTTP request: the chunk that starts one is where chaos decides its fault.
_METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"HEAD ", b"PATCH ")


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode: Mode = "pass"
        self.delay_s = 0.0
        self._drops_left = 0
        self._marker: bytes | None = None
        self._marked_drops_left = 0
        self._cut_marker: bytes | None = None
        self._cuts_left = 0
        self.cut_requests = 0
        self._stall_marker: bytes | None = None
        self._stalls_left = 0
        self.stalled_requests = 0
        self._chaos: tuple[random.Random, float] | None = None
        self.faults: dict[Fault, int] = {"reset": 0, "lose": 0, "stall": 0}
        self._hold_marker: bytes | None = None
        self.held = threading.Event()  # set once a request is held by `hold_when`
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self.connections = 0
        self.dropped_responses = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> "TcpProxy":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._released.set()  # a held request's thread ends with the proxy
        self._closing.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def drop_next(self, count: int) -> None:
        with self._lock:
            self._drops_left = count

    def cut_when(self, marker: bytes, count: int = 1) -> None:
        with self._lock:
            self._cut_marker, self._cuts_left = marker, count

    def stall_when(self, marker: bytes, count: int = 1) -> None:
        with self._lock:
            self._stall_marker, self._stalls_left = marker, count

    def chaos(self, rng: random.Random, rate: float) -> None:
        with self._lock:
            self._chaos = (rng, rate)

    def _take_fault(self, data: bytes) -> tuple[Fault | None, float]:
        """The fault chaos gives the request `data` starts, if any, and a stall's seconds."""
        with self._lock:
            if self._chaos is None or not data.startswith(_METHODS):
                return None, 0.0
            rng, rate = self._chaos
            if rng.random() >= rate:
                return None, 0.0
            fault: Fault = rng.choice(("reset", "lose", "stall"))
            self.faults[fault] += 1
            return fault, rng.uniform(0.5, 3.0)

    def hold_when(self, marker: bytes) -> None:
        with self._lock:
            self._hold_marker = marker
        self.held.clear()
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def _take_hold(self, data: bytes) -> bool:
        with self._lock:
            if self._hold_marker is not None and self._hold_marker in data:
                self._hold_marker = None
                return True
            return False

    def _take_stall(self, data: bytes) -> bool:
        with self._lock:
            if self._stall_marker is not None and self._stall_marker in data and self._stalls_left > 0:
                self._stalls_left -= 1
                self.stalled_requests += 1
                return True
            return False

    def _take_cut(self, data: bytes) -> bool:
        with self._lock:
            if self._cut_marker is not None and self._cut_marker in data and self._cuts_left > 0:
                self._cuts_left -= 1
                self.cut_requests += 1
                return True
            return False

    def drop_when(self, marker: bytes, count: int = 1) -> None:
        with self._lock:
            self._marker, self._marked_drops_left = marker, count

    def _take_drop(self, marked: bool) -> bool:
        with self._lock:
            if marked and self._marked_drops_left > 0:
                self._marked_drops_left -= 1
                return True
            if self._drops_left > 0:
                self._drops_left -= 1
                return True
            return self.mode == "drop_response"

    def _marks(self, data: bytes) -> bool:
        with self._lock:
            return self._marker is not None and self._marker in data

    def _track(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
        return sock

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(self._track(client),), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.mode == "refuse":
            # SO_LINGER 0: close sends a reset, as a host with nothing listening would. The proxy's
            # own close may have shut the socket first: then there is nothing left to refuse.
            with contextlib.suppress(OSError):
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            return
        if self.mode == "stall":
            with contextlib.suppress(OSError):
                while client.recv(65536):
                    pass
            return
        try:
            upstream = self._track(socket.create_connection(self._target, timeout=30))
        except OSError:
            client.close()
            return
        marked = threading.Event()  # the request now on this connection carries the marker
        lose = threading.Event()  # chaos chose to lose the answer of the request now on it
        threading.Thread(target=self._pump, args=(client, upstream, marked, lose), daemon=True).start()
        self._answers(upstream, client, marked, lose)

    def _pump(self, source: socket.socket, sink: socket.socket, marked: threading.Event, lose: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if self._take_cut(data):  # the request never reaches the server
                    for sock in (source, sink):
                        with contextlib.suppress(OSError):
                            sock.close()
                    return
                if self._take_stall(data):  # held: read on until the client gives up, answer nothing
                    while source.recv(65536):
                        pass
                    for sock in (source, sink):
                        with contextlib.suppress(OSError):
                            sock.close()
                    return
                fault, stall_s = self._take_fault(data)
                if fault == "reset":  # before the server sees it
                    for sock in (source, sink):
                        with contextlib.suppress(OSError):
                            sock.close()
                    return
                if fault == "lose":
                    lose.set()
                if fault == "stall":
                    time.sleep(stall_s)
                if self._take_hold(data):  # on the wire until the test releases it
                    self.held.set()
                    self._released.wait()
                if self._marks(data):
                    marked.set()
                if self.delay_s:
                    time.sleep(self.delay_s)
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def _answers(
        self, upstream: socket.socket, client: socket.socket, marked: threading.Event, lose: threading.Event
    ) -> None:
        """Server → client; the first chunk of a response to drop closes both sides instead."""
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                is_marked = marked.is_set()
                marked.clear()
                if self._take_drop(is_marked) or lose.is_set():
                    self.dropped_responses += 1
                    for sock in (client, upstream):
                        with contextlib.suppress(OSError):
                            sock.close()
                    return
                client.sendall(data)
        with contextlib.suppress(OSError):
            client.close()


@contextlib.contextmanager
def proxy_to(port: int) -> Iterator[TcpProxy]:
    with TcpProxy(port) as proxy:
        yield proxy

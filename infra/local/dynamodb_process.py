"""moto's server (DynamoDB, SQS, SSM) as the local stack's child process: its socket bound here and
handed to it, started, waited for, and ended for good."""

import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

from infra.local.errors import LocalToolError
from infra.local.ports import listen_on, port_of

# The first request to a server that was just started: a server that accepts connections and never
# answers is reported after this, not after botocore's minutes of retries.
FIRST_ANSWER_TIMEOUT_S = 5.0


READY = b"ready\n"  # what the server writes on its ready pipe once it serves (infra/local/dynamodb_server.py)


def wait_until_ready(process: "subprocess.Popen[bytes]", ready: int, timeout_s: float) -> None:
    """Return once a child server says on its pipe `ready` that it serves; RuntimeError if it exits
    (the pipe closes) or never does. Its socket accepts connections from the start, so a connection
    that succeeds says nothing: the server's own word does."""
    deadline, said = time.monotonic() + timeout_s, b""
    # A selector, not select(): select() refuses a descriptor numbered 1024 or more, which a
    # process holding many sockets (a test worker, a long console session) reaches.
    with selectors.DefaultSelector() as selector:
        selector.register(ready, selectors.EVENT_READ)
        while READY not in said:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"did not start within {timeout_s} s")
            if selector.select(left):
                chunk = os.read(ready, 64)
                if not chunk:  # the pipe closed without a word: the process ended
                    raise RuntimeError(f"exited with code {process.wait()}")
                said += chunk


def end_child(process: "subprocess.Popen[bytes]") -> None:
    """Stop a child server: politely, then for good if it does not end within 10 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class LocalDynamoDB:
    """moto's server (DynamoDB, SQS, SSM) in a child process, so its state is its own; each request
    is applied atomically, as DynamoDB does (see infra/local/dynamodb_server.py)."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, flat: bool = True) -> None:
        """Binds `port` now (None or 0: one the system chooses; OSError if it is taken), for the
        server to inherit. `flat`: with the layer that keeps a request's cost flat in the table's
        size (False: moto as it is)."""
        self._listener = listen_on(host, port or 0)
        self.host, self.port = host, port_of(self._listener)
        self.flat = flat
        self._process: subprocess.Popen[bytes] | None = None
        self._ready: int | None = None

    @property
    def url(self) -> str:
        # A server listening on every interface is still reached through loopback from here.
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.port}"  # noqa: S104

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, timeout_s: float = 30.0, policies: Path | None = None) -> "LocalDynamoDB":
        """`policies`: the template's policies to enforce (infra/local/iam/gate.py gate_settings, as JSON)."""
        return self.launch(policies).wait_listening(timeout_s)

    def launch(self, policies: Path | None = None) -> "LocalDynamoDB":
        """Start the process without waiting for it (its import of moto takes a second or so, which
        the caller may spend on other work before `wait_listening`)."""
        enforce = [] if policies is None else ["--policies", str(policies)]
        enforce += [] if self.flat else ["--moto-as-is"]
        listener = self._listener.fileno()
        self._ready, ready_w = os.pipe()
        try:
            self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "infra.local.dynamodb_server", "-H", self.host, "-p", str(self.port),
                 "--fd", str(listener), "--ready-fd", str(ready_w), "--parent-pid", str(os.getpid()), *enforce],
                cwd=Path(__file__).parents[2],  # where `infra` is importable from
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(listener, ready_w),
                # Its own session: a Ctrl-C in the terminal reaches only us, so the table can still be
                # saved from the running server before we stop it. (It ends itself if we die first.)
                start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(ready_w)  # the child's copy is the only writer: its end closes the pipe
            # The child holds the port now; ours would keep it bound after the child ended.
            self._listener.close()
        return self

    def wait_listening(self, timeout_s: float = 30.0) -> "LocalDynamoDB":
        if self._process is None:
            raise LocalToolError("the local DynamoDB server was not launched")
        try:
            if self._ready is not None:
                wait_until_ready(self._process, self._ready, timeout_s)
        except RuntimeError as error:
            self.stop()
            raise LocalToolError(f"the local DynamoDB server (port {self.port}) {error}") from None
        finally:
            self._close_ready()
        return self

    def _close_ready(self) -> None:
        if self._ready is not None:
            os.close(self._ready)
            self._ready = None

    def stop(self) -> None:
        self._listener.close()  # a server never launched lets its port go too
        self._close_ready()
        if self._process is not None:
            end_child(self._process)
        self._process = None

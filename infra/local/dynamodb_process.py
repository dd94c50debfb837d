"""moto's server (DynamoDB, SQS, SSM) as the local stack's child process: started, waited for, and
ended for good."""

import os
import subprocess
import sys
import time
from pathlib import Path

from infra.local.errors import LocalToolError
from infra.local.ports import free_port

# The first request to a server that was just started: a server that accepts connections and never
# answers is reported after this, not after botocore's minutes of retries.
FIRST_ANSWER_TIMEOUT_S = 5.0


def wait_until_listening(process: "subprocess.Popen[bytes]", host: str, port: int, timeout_s: float) -> None:
    """Return once a child server accepts connections; RuntimeError if it exits or never does."""
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with code {process.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"did not start within {timeout_s} s")


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
        """`flat`: with the layer that keeps a request's cost flat in the table's size (False: moto as it is)."""
        self.host, self.port = host, port or free_port(host)
        self.flat = flat
        self._process: subprocess.Popen[bytes] | None = None

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
        self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "infra.local.dynamodb_server", "-H", self.host, "-p", str(self.port),
             "--parent-pid", str(os.getpid()), *enforce],
            cwd=Path(__file__).parents[2],  # where `infra` is importable from
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: a Ctrl-C in the terminal reaches only us, so the table can still be
            # saved from the running server before we stop it. (It ends itself if we die first.)
            start_new_session=True,
        )  # fmt: skip
        return self

    def wait_listening(self, timeout_s: float = 30.0) -> "LocalDynamoDB":
        if self._process is None:
            raise LocalToolError("the local DynamoDB server was not launched")
        try:
            wait_until_listening(self._process, self.host, self.port, timeout_s)
        except RuntimeError as error:
            self.stop()
            raise LocalToolError(f"the local DynamoDB server (port {self.port}) {error}") from None
        return self

    def stop(self) -> None:
        if self._process is not None:
            end_child(self._process)
        self._process = None

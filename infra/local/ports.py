"""Owns the local servers' ports: each server's listening socket, bound at once on the port the
person gave or on one the system chooses (0), and the port read back from that socket; a taken port
named with the option that changes it (and with the local stack that holds it, when it is one of
ours); a quick test that a server answers at all.

No port number is ever chosen first and bound later: between the two, any process (another test's
stack, the kernel's ephemeral ports, a second stack of the person's) can take it. A server in a
child process inherits the socket bound here (infra/local/dynamodb_process.py)."""

import errno
import http.client
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from infra.local.errors import LocalToolError

ANSWER_TIMEOUT_S = 3.0  # a local server answers in milliseconds; this is long enough for a busy machine


class PortInUseError(LocalToolError):
    pass


class NotAnsweringError(LocalToolError):
    pass


@dataclass(frozen=True)
class FixedPort:
    """A port the person chose (or its default), and the option that changes it."""

    what: str  # the server, as the person knows it: "DynamoDB", "the API"
    port: int
    option: str


LISTEN_BACKLOG = 128  # connections the system queues before the server accepts them


def listen_on(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `port` (0: one the system chooses; `port_of` tells which), with
    SO_REUSEADDR as the servers set it, so a port left in TIME_WAIT by a stopped server is usable
    and a listening one is not. OSError (EADDRINUSE) when it is taken."""
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets that
    # say they are TCP, and a streamed reply's small writes would otherwise wait for a delayed ACK.
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(LISTEN_BACKLOG)
    except BaseException:
        listener.close()
        raise
    return listener


def port_of(listener: socket.socket) -> int:
    return int(listener.getsockname()[1])


def _listening_pid(port: int) -> int | None:
    """The process listening on `port` (Linux's /proc; None where it cannot be told)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if str(fd.readlink()) in inodes:
                return int(fd.parts[2])
        except OSError:  # gone, or not ours to read
            continue
    return None


def _command_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def taken(fixed: FixedPort, host: str) -> str:
    """What a person is told of a taken port: who holds it (one of this project's local tools, by
    its pid: moto's server by the stack that started it; else "another program") and what to do."""
    pid = _listening_pid(fixed.port)
    command = _command_of(pid) if pid is not None else []
    if "infra.local.dynamodb_server" in command and "--parent-pid" in command:
        pid = int(command[command.index("--parent-pid") + 1])
        command = _command_of(pid)
    tool = command[command.index("-m") + 1] if "-m" in command[:-1] else ""
    where = f"port {fixed.port} on {host} (for {fixed.what})"
    if pid is None or not tool.startswith("infra."):
        return f"{where} is taken by another program; choose another with {fixed.option} PORT, or stop that program"
    return (
        f"{where} is taken by this project's {tool} (pid {pid}), a local stack already running: use it "
        f"(infra.chat, infra.sms, ... attach to it), stop it (kill {pid}), or choose another with {fixed.option} PORT"
    )


def check_distinct(ports: list[FixedPort]) -> None:
    """PortInUseError when two servers were given one port (0, any free one, is never shared)."""
    seen: dict[int, FixedPort] = {}
    for fixed in ports:
        if fixed.port in seen:
            raise PortInUseError(
                f"{fixed.what} and {seen[fixed.port].what} were both given port {fixed.port}; "
                f"choose another with {fixed.option} PORT"
            )
        if fixed.port:
            seen[fixed.port] = fixed


Bound = TypeVar("Bound")


def bound(fixed: FixedPort, host: str, listen: Callable[[], Bound]) -> Bound:
    """`listen()` (a server binding `fixed.port`, or 0), with a taken port named with its option
    and holder in one line, not as a traceback."""
    try:
        return listen()
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise PortInUseError(taken(fixed, host)) from None


def check_answers(url: str, what: str, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
    """NotAnsweringError unless the HTTP server at `url` answers a request (any status) within `timeout_s`."""
    host_port = url.removeprefix("http://").split("/", 1)[0]
    connection = http.client.HTTPConnection(host_port, timeout=timeout_s)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
    except (OSError, http.client.HTTPException) as error:  # refused, reset, timed out, or not HTTP
        reason = "did not answer" if isinstance(error, TimeoutError) else f"could not be reached ({error})"
        raise NotAnsweringError(f"{what} at {url} {reason} within {timeout_s:g} s") from None
    finally:
        connection.close()


# The options of `python -m infra.local_stack` that change each fixed port of the local stack.
STACK_PORT_OPTIONS = {
    "dynamodb": ("the local DynamoDB server", "--dynamodb-port"),
    "bedrock": ("the Bedrock emulator", "--bedrock-port"),
    "api": ("the API", "--api-port"),
    "twilio": ("the Twilio stand-in", "--twilio-port"),
    "s3vectors": ("the S3 Vectors stand-in", "--s3vectors-port"),
}


def stack_ports(given: dict[str, int | None], api_option: str) -> dict[str, FixedPort]:
    """Every port the local stack was asked for (by server: 0 or None for any free one), each named
    with the option that changes it (`api_option` is the one of the command that starts the stack);
    two servers given one port are refused before any binds. Each server then binds its own through
    `bound`, and the stack reads the port it got from the bound socket."""
    options = {**{name: option for name, (_, option) in STACK_PORT_OPTIONS.items()}, "api": api_option}
    asked = {name: FixedPort(STACK_PORT_OPTIONS[name][0], port or 0, options[name]) for name, port in given.items()}
    check_distinct(list(asked.values()))
    return asked

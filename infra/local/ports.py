"""Owns the local servers' ports: a free one for a server that may use any, a check before a fixed
one is used (a taken port is named with the option that changes it, and with the local stack that
holds it when it is one of ours, before any server starts), and a quick test that a server answers
at all."""

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


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """True when a server could listen on `port` now. SO_REUSEADDR as the servers set it, so a port
    left in TIME_WAIT by a server that just stopped counts as free, and a listening one does not."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


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


def check_ports(host: str, ports: list[FixedPort]) -> None:
    """PortInUseError naming the first taken port and its option; also when two servers were given one port."""
    seen: dict[int, FixedPort] = {}
    for fixed in ports:
        if fixed.port in seen:
            raise PortInUseError(
                f"{fixed.what} and {seen[fixed.port].what} were both given port {fixed.port}; "
                f"choose another with {fixed.option} PORT"
            )
        seen[fixed.port] = fixed
        if not port_is_free(host, fixed.port):
            raise PortInUseError(taken(fixed, host))


Bound = TypeVar("Bound")


def bound(fixed: FixedPort, host: str, listen: Callable[[], Bound]) -> Bound:
    """`listen()` (a server binding `fixed.port`), with a port taken since the check (another
    stack started meanwhile) named as the check names it, not as a traceback."""
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


def stack_ports(host: str, given: dict[str, int | None], api_option: str) -> dict[str, FixedPort]:
    """Every port of the local stack (by server: 0 or None for any free one), chosen together before
    any server starts: the given ones checked, each named with the option that changes it (`api_option`
    is the one of the command that starts the stack), the others free ones. A server that binds its
    port later does so through `bound`, so a port taken meanwhile is one line too."""
    options = {**{name: option for name, (_, option) in STACK_PORT_OPTIONS.items()}, "api": api_option}
    chosen = {name: FixedPort(STACK_PORT_OPTIONS[name][0], port or 0, options[name]) for name, port in given.items()}
    check_ports(host, [fixed for fixed in chosen.values() if fixed.port])
    return {
        name: fixed if fixed.port else FixedPort(fixed.what, free_port(host), fixed.option)
        for name, fixed in chosen.items()
    }

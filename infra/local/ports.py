"""Owns the local servers' ports: a free one for a server that may use any, a check before a fixed
one is used (a taken port is named with the option that changes it, before any server starts), and
a quick test that a server answers at all."""

import http.client
import socket
from dataclasses import dataclass

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
            raise PortInUseError(
                f"port {fixed.port} on {host} (for {fixed.what}) is taken by another program; "
                f"choose another with {fixed.option} PORT, or stop that program"
            )


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


def check_stack_ports(host: str, fixed: dict[str, int | None], api_option: str) -> None:
    """The local stack's fixed ports (by server: 0 or None for any free one), each named with the
    option that changes it; `api_option` is the one of the command that starts the stack."""
    options = {**{name: option for name, (_, option) in STACK_PORT_OPTIONS.items()}, "api": api_option}
    check_ports(
        host, [FixedPort(STACK_PORT_OPTIONS[name][0], port, options[name]) for name, port in fixed.items() if port]
    )

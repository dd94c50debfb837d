"""Ports for tests, held for as long as the test needs them: a number is never picked, let go and
used later (infra/local/ports.py says why)."""

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def unanswered_port() -> Iterator[int]:
    """A port where nothing answers: bound for the whole block and never listening, so a connection
    to it is refused, and no other process can start a server on it meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])

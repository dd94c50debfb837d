"""moto's server, with each DynamoDB request applied atomically:
`python -m infra.local.dynamodb_server -H host -p port`.

A request's cost does not grow with the table (infra/local/flat_dynamodb.py; `--moto-as-is` for
moto's own). With `--policies FILE`, each request is first checked against the template's policy of the
function that signed it, and refused as AWS refuses it when the policy does not allow it
(infra/local/iam/).

DynamoDB applies every request atomically: a conditional write's check and its write are one
step, and `TransactWriteItems` is serializable against other writes. moto's own server is threaded
and does not do that: two concurrent conditional writes can both pass their condition, and a
cancelled `TransactWriteItems` puts back a copy of its tables taken before it started, undoing or
reviving what other requests wrote meanwhile. Tests that race deliveries of one message against
each other need the real behaviour, so this serves moto's WSGI app behind one lock per DynamoDB
request. Clients still connect and wait concurrently; only the applying of a request is
serialized, which is what DynamoDB guarantees per request and nothing more (our code's own race
windows, between requests, stay open).
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from moto.moto_server.threaded_moto_server import MotoRequestHandler  # type: ignore[attr-defined]
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from infra.local.dynamodb_process import READY

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
# What the local stack asks (the scheduler: the check-in schedules, which the stack's clock fires).
SERVICES: tuple[Literal["dynamodb", "sqs", "ssm", "scheduler"], ...] = ("dynamodb", "sqs", "ssm", "scheduler")


def one_request_at_a_time(app: WsgiApp) -> WsgiApp:
    lock = threading.Lock()

    def serialized(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB_"):
            # SQS and SSM pass through: an SQS long poll waits for messages, and must not hold the lock.
            return app(environ, start_response)
        with lock:
            # The whole body is produced under the lock: the request is applied before another starts.
            result = app(environ, start_response)
            try:
                return list(result)
            finally:
                close = getattr(result, "close", None)  # as a WSGI server would, once the body is read
                if close is not None:
                    close()

    return serialized


def end_with_parent(parent_pid: int, every_s: float = 0.5) -> None:
    """Exit once `parent_pid` is gone: a stack killed outright (SIGKILL, a crash) cannot stop its
    server, and an orphan would keep the port (and a stale table) until someone found it."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=8000)
    parser.add_argument(
        "--fd", type=int, help="serve on this listening socket, bound by the parent on --port (else bind --port)"
    )
    parser.add_argument("--ready-fd", type=int, help="write 'ready' to this pipe once serving, then close it")
    parser.add_argument("--parent-pid", type=int, help="exit when this process (the stack that started us) ends")
    parser.add_argument(
        "--policies",
        type=Path,
        help="JSON of the template's policies to enforce (infra/local/iam/gate.py gate_settings)",
    )
    parser.add_argument(
        "--moto-as-is",
        action="store_true",
        help="without the flat-cost layer (infra/local/flat_dynamodb.py): moto's own cost, for comparing",
    )
    args = parser.parse_args(argv)
    if not args.moto_as_is:
        from infra.local.flat_dynamodb import install

        install()
    if args.parent_pid is not None:
        end_with_parent(args.parent_pid)
    # As moto's own server does: queue URLs carry this port, and a stop signal ends the process cleanly.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    # Nothing to flush (the stack saves the table through the API before it stops us): end at once,
    # without the interpreter's teardown of moto's many modules (a stack stops in ~0.05 s, not ~0.4 s).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    dispatcher = DomainDispatcherApplication(create_backend_app)
    for service in SERVICES:  # made now, before we listen: else each service's first request waits for it
        dispatcher.app_instances[service] = create_backend_app(service)
    app = one_request_at_a_time(dispatcher)
    if args.policies is not None:
        from infra.local.iam.gate import gate_from, policy_checked

        app = policy_checked(app, gate_from(json.loads(args.policies.read_text(encoding="utf-8"))))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler, fd=args.fd)
    if args.ready_fd is not None:
        os.write(args.ready_fd, READY)
        os.close(args.ready_fd)
    server.serve_forever()


if __name__ == "__main__":
    main()

"""The embedded local stack: moto's server over HTTP (DynamoDB, SQS, SSM), the Bedrock emulator,
the Twilio stand-in and, on request, the local gateway (API routes and the SQS poller).

moto runs under infra/dynamodb_server.py, which applies each DynamoDB request atomically, as
DynamoDB does: moto's own threaded server lets concurrent requests interleave (two conditional
writes can both pass one condition; a cancelled transaction's rollback can undo another's writes),
and the concurrency tests race exactly such requests.

Code under test is pointed at it only through AWS's standard endpoint variables
(`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, `AWS_ENDPOINT_URL_SQS`, ...),
exactly as it would be at any other endpoint; Twilio's client through `TWILIO_API_BASE_URL`.
With `data_file` set, the conversation table survives restarts: it is loaded from that file on
start and written back after every `save()` and on stop.

Run `python -m infra.local_stack` to keep one running in the foreground for other processes
(for example `sam local invoke --env-vars events/env.local.json`).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from infra.errors import LocalToolError, run_tool, uninterrupted
from infra.flags import FLAGS_FILE_VARIABLE, checked_flags_file
from infra.local_data import (
    DataFileInUseError,
    DataLock,
    StackState,
    atomic_write,
    read_state,
    remove_state,
    write_state,
)
from infra.ports import FixedPort, NotAnsweringError, check_answers, check_ports, free_port

# The servers, boto3 and the gateway are imported when a stack starts, not with this module: so that
# `python -m infra.local_stack` checks its ports (and says which one is taken) within a second.
if TYPE_CHECKING:
    from infra.local_gateway import LocalGateway, QueuePoller

__all__ = ["LOCAL_AWS_ENVIRONMENT", "LocalDynamoDB", "LocalStack", "end_child", "free_port", "wait_until_listening"]

TABLE_LOGICAL_ID = "ConversationTable"
DEFAULT_TABLE_NAME = "onboarding-memory-local"
DEFAULT_DATA_FILE = Path(".local/dynamodb.jsonl")
IDEMPOTENCY_TABLE_NAME = "onboarding-idempotency-local"
SMS_QUEUE_NAME = "onboarding-sms-local.fifo"
# The URL the sample events are signed for; with the gateway running, its own /sms replaces it.
SAMPLE_WEBHOOK_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/v1/sms"
TWILIO_AUTH_TOKEN_PARAMETER = "/onboarding-memory/twilio-auth-token"  # noqa: S105 - a parameter name
LOCAL_REGION = "us-east-1"
# moto copies its whole table for every transaction, so on a big local table (the benchmark's, a
# long-lived data file) an answer can take seconds that DynamoDB answers in milliseconds: locally the
# table client waits longer, and the turn's deadline keeps room for it. A value already set wins.
LOCAL_TIMEOUTS = {"DYNAMODB_READ_TIMEOUT_S": "10", "TURN_STORE_RESERVE_S": "35", "TURN_DEADLINE_S": "90"}
# Region and dummy credentials for the local servers; no real AWS credentials are involved.
LOCAL_AWS_ENVIRONMENT = {
    "AWS_REGION": LOCAL_REGION,
    "AWS_DEFAULT_REGION": LOCAL_REGION,
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
}
# The options of `python -m infra.local_stack` that change each fixed port.
PORT_OPTIONS = {
    "dynamodb": ("the local DynamoDB server", "--dynamodb-port"),
    "bedrock": ("the Bedrock emulator", "--bedrock-port"),
    "api": ("the API", "--api-port"),
    "twilio": ("the Twilio stand-in", "--twilio-port"),
}
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
    is applied atomically, as DynamoDB does (see infra/dynamodb_server.py)."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host, self.port = host, port or free_port(host)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        # A server listening on every interface is still reached through loopback from here.
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.port}"  # noqa: S104

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, timeout_s: float = 30.0) -> "LocalDynamoDB":
        self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "infra.dynamodb_server", "-H", self.host, "-p", str(self.port),
             "--parent-pid", str(os.getpid())],
            cwd=Path(__file__).parents[1],  # where `infra` is importable from
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: a Ctrl-C in the terminal reaches only us, so the table can still be
            # saved from the running server before we stop it. (It ends itself if we die first.)
            start_new_session=True,
        )  # fmt: skip
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


class LocalStack:
    """Start with `with LocalStack() as stack:`; the process environment then points at it.

    With `data_file`, the stack owns that file while it runs (see infra/local_data.py): it takes
    the file's lock (DataFileInUseError if another stack holds it), loads it, publishes its state for
    other tools to attach to, and saves the table back on `save()` and when it stops, whatever
    stops it (Ctrl-C included)."""

    def __init__(
        self,
        data_file: Path | None = None,
        chunk_delay_s: float = 0.0,
        table_name: str = DEFAULT_TABLE_NAME,
        dynamodb_port: int | None = None,
        bedrock_port: int = 0,
        host: str = "127.0.0.1",
        api_port: int | None = None,
        twilio_port: int = 0,
        command: str = "a local stack",
        gateway_wrap: Callable[[Any], Any] | None = None,
        flags_file: Path | None = None,
        real_model: bool = False,
    ) -> None:
        """`api_port` (0 for any free port) also serves the template's API routes and polls the SMS queue;
        `gateway_wrap` wraps the gateway's ASGI app (the memory console, infra/console); `flags_file`
        is the feature flags file every turn's flags come from (FEATURE_FLAGS_FILE). Fixed ports
        are checked before anything starts: PortInUseError names the taken one and its option.

        `real_model` (the memory benchmark's --aws) leaves the model to the environment: the
        emulator still starts but nothing is pointed at it, and the process keeps its own
        credentials and region (the local servers accept any; their resources are made in that
        region, as moto keeps one set per region)."""
        from infra.bedrock_emulator import BedrockEmulator
        from infra.twilio_emulator import TwilioEmulator

        fixed = {"dynamodb": dynamodb_port, "bedrock": bedrock_port, "api": api_port, "twilio": twilio_port}
        check_ports(
            host,
            [FixedPort(PORT_OPTIONS[name][0], port, PORT_OPTIONS[name][1]) for name, port in fixed.items() if port],
        )
        self.data_file = data_file
        self.table_name = table_name
        self.real_model = real_model
        self.region = (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or LOCAL_REGION
            if real_model
            else LOCAL_REGION
        )
        self.host = host
        self.command = command
        self._lock = DataLock(data_file) if data_file is not None else None
        if data_file is not None and self._lock is not None and not self._lock.try_acquire():
            raise _in_use(data_file)
        self._loaded = False
        try:
            self.dynamodb = LocalDynamoDB(host=host, port=dynamodb_port)
            self.bedrock = BedrockEmulator(host=host, port=bedrock_port, chunk_delay_s=chunk_delay_s)
            self.twilio = TwilioEmulator(host=host, port=twilio_port)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self.api_port = None if api_port is None else (api_port or free_port(host))
        self.gateway_wrap = gateway_wrap
        self.flags_file = flags_file
        self.sms_queue_url = ""
        self._gateway: LocalGateway | None = None
        self._pollers: list[QueuePoller] = []
        self._saved_env: dict[str, str | None] = {}

    @property
    def api_url(self) -> str:
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.api_port}"  # noqa: S104

    @property
    def environment(self) -> dict[str, str]:
        """What a process needs to use this stack; no real AWS credentials are involved."""
        model: dict[str, str] = (
            {"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region}
            if self.real_model
            else {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock.url, **LOCAL_AWS_ENVIRONMENT}
        )
        return {
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.url,
            **model,
            "TABLE_NAME": self.table_name,
            "AWS_ENDPOINT_URL_SQS": self.dynamodb.url,
            "AWS_ENDPOINT_URL_SSM": self.dynamodb.url,
            "IDEMPOTENCY_TABLE_NAME": IDEMPOTENCY_TABLE_NAME,
            "SMS_QUEUE_URL": self.sms_queue_url,
            "TWILIO_ACCOUNT_SID": self.twilio.account_sid,
            "TWILIO_AUTH_TOKEN_PARAMETER": TWILIO_AUTH_TOKEN_PARAMETER,
            "TWILIO_API_BASE_URL": self.twilio.url,
            "TWILIO_WEBHOOK_URL": SAMPLE_WEBHOOK_URL if self.api_port is None else f"{self.api_url}/sms",
            **{name: os.environ.get(name, value) for name, value in LOCAL_TIMEOUTS.items()},
            **({FLAGS_FILE_VARIABLE: str(self.flags_file)} if self.flags_file is not None else {}),
        }

    def __enter__(self) -> "LocalStack":
        try:
            self.dynamodb.start()
            self.bedrock.start()
            self.twilio.start()
            self._create_resources()
            for name, value in self.environment.items():
                self._saved_env[name] = os.environ.get(name)
                os.environ[name] = value
            self._load()
            if self.api_port is not None:
                from infra.local_gateway import LocalGateway, QueuePoller, queue_subscribers

                self._gateway = LocalGateway(self.host, self.api_port, self.gateway_wrap).start()
                self._pollers = [
                    QueuePoller(logical_id, self.sms_queue_url).start() for logical_id in queue_subscribers("SmsQueue")
                ]
            if self.data_file is not None:
                write_state(self.data_file, self.state())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def state(self) -> StackState:
        """What other tools need to attach to this stack."""
        return StackState(
            pid=os.getpid(),
            command=self.command,
            environment=self.environment,
            twilio_url=self.twilio.url,
            api_url=None if self.api_port is None else self.api_url,
            children=[pid for pid in (self.dynamodb.pid,) if pid is not None],
        )

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with uninterrupted():
            try:
                if self.data_file is not None:
                    remove_state(self.data_file)  # first, so that no tool attaches to a stack that is stopping
                if self._loaded:  # a stack that failed before loading its file must not overwrite it
                    self._save_or_warn()
            finally:
                for poller in self._pollers:
                    poller.stop()
                if self._gateway is not None:
                    self._gateway.stop()
                self.twilio.stop()
                self.bedrock.stop()
                self.dynamodb.stop()
                for name, value in self._saved_env.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
                if self._lock is not None:
                    self._lock.release()

    def _save_or_warn(self) -> None:
        try:
            self.save()
        except Exception as error:  # the file keeps its last save; say so instead of a traceback
            print(
                f"warning: could not save the table to {self.data_file} ({error}); it keeps its last save",
                file=sys.stderr,
            )

    def _client(self, service: str = "dynamodb", first: bool = False) -> Any:
        import boto3
        from botocore.config import Config

        # The first request to a fresh server gets one short try, so a server that never answers is
        # reported in seconds; later ones botocore's usual retries.
        config = (
            Config(read_timeout=FIRST_ANSWER_TIMEOUT_S, connect_timeout=2, retries={"total_max_attempts": 1})
            if first
            else None
        )
        return boto3.client(  # type: ignore[call-overload]
            service,
            region_name=self.region,
            endpoint_url=self.dynamodb.url,
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the local server's dummy credentials
            config=config,
        )

    def _create_resources(self) -> None:
        """The template's tables and queue, and the secret the SMS functions read."""
        from botocore.exceptions import BotoCoreError

        from infra.template import table_create_request

        try:
            check_answers(
                self.dynamodb.url, f"the local DynamoDB server (port {self.dynamodb.port})", FIRST_ANSWER_TIMEOUT_S
            )
            self._client(first=True).create_table(**table_create_request(TABLE_LOGICAL_ID, self.table_name))
        except (NotAnsweringError, BotoCoreError) as error:
            raise LocalToolError(str(error)) from None
        dynamodb = self._client()
        dynamodb.create_table(**table_create_request("IdempotencyTable", IDEMPOTENCY_TABLE_NAME))
        self.sms_queue_url = self._client("sqs").create_queue(
            QueueName=SMS_QUEUE_NAME,
            # Short, so a failed text is retried within seconds locally (the template's is longer).
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "5"},
        )["QueueUrl"]
        self._client("ssm").put_parameter(
            Name=TWILIO_AUTH_TOKEN_PARAMETER, Value=self.twilio.auth_token, Type="SecureString", Overwrite=True
        )

    def items(self) -> Iterator[dict[str, Any]]:
        for page in self._client().get_paginator("scan").paginate(TableName=self.table_name):
            yield from page["Items"]

    def save(self) -> None:
        """Write every item to `data_file` (one DynamoDB-JSON item a line), atomically."""
        if self.data_file is None:
            return
        atomic_write(self.data_file, (json.dumps(item, ensure_ascii=False) + "\n" for item in self.items()))

    def _load(self) -> None:
        if self.data_file is None or not self.data_file.exists():
            self._loaded = True
            return
        client = self._client()
        lines = [line for line in self.data_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        for start in range(0, len(lines), 25):
            requests = [{"PutRequest": {"Item": json.loads(line)}} for line in lines[start : start + 25]]
            pending: dict[str, Any] = {self.table_name: requests}
            while pending:
                pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
        self._loaded = True


def _in_use(data_file: Path) -> DataFileInUseError:
    state = read_state(data_file)
    owner = state.describe() if state is not None else "another local tool"
    return DataFileInUseError(
        f"{data_file} is in use by {owner}; only one local stack may write it at a time. "
        "The other tools (infra.chat, infra.invoke, infra.sms, infra.inspect_prompt) attach to it; "
        "to start another stack, stop that one first or pass --data-file with another file"
    )


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the stack as Ctrl-C does: saved and stopped."""
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dynamodb-port", type=int, default=8000)
    parser.add_argument("--bedrock-port", type=int, default=8001)
    parser.add_argument("--api-port", type=int, default=3000, help="the API routes (like `sam local start-api`)")
    parser.add_argument("--twilio-port", type=int, default=8002)
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on; 0.0.0.0 lets `sam local invoke` containers reach it"
    )
    parser.add_argument(
        "--flags",
        type=Path,
        help="feature flags JSON file (docs/rollout.md); edits apply within FEATURE_FLAGS_MAX_AGE_S",
    )
    arguments = parser.parse_args()
    flags_file = None if arguments.flags is None else checked_flags_file(arguments.flags)
    signal.signal(signal.SIGTERM, _interrupt)
    # Also when started in the background of a script, which would have Ctrl-C ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with LocalStack(
        arguments.data_file,
        0.02,
        dynamodb_port=arguments.dynamodb_port,
        bedrock_port=arguments.bedrock_port,
        host=arguments.host,
        api_port=arguments.api_port,
        twilio_port=arguments.twilio_port,
        command="infra.local_stack",
        flags_file=flags_file,
    ) as stack:
        print(f"Local stack running. API: {stack.api_url} (OpenAPI at {stack.api_url}/openapi.json;")
        print("  send `Authorization: Bearer <any user id>`), SMS webhook: POST /sms.")
        print(f"Data: {arguments.data_file} (saved every 5 s and on exit). infra.chat, infra.invoke, infra.sms and")
        print("  infra.inspect_prompt use this stack while it runs. Point another process at it with:")
        for name, value in stack.environment.items():
            print(f"  export {name}={value}")
        print("Ctrl-C stops it and saves the table.", flush=True)
        try:
            while True:
                time.sleep(5)
                stack.save()
        except KeyboardInterrupt:
            pass  # how it is meant to stop; the `with` saves the table and stops the servers
    print("Stopped; the table is saved.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main, stopped="Stopped while starting; the data file is as it was."))

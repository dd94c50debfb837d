"""The embedded local stack: moto's server over HTTP (DynamoDB and its stream, SQS, SSM), the Bedrock
emulator (the coach and the embedding model), the S3 Vectors stand-in (the recall index), the
Twilio stand-in, the recall indexer fed from the table's stream, and, on request, the local gateway
(API routes and the SQS poller).

moto runs under infra/local/dynamodb_server.py, which applies each DynamoDB request atomically, as
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

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from infra.local import stack_resources as resources
from infra.local.data import DataLock, StackState, in_use_error, local_folder, remove_state, write_state
from infra.local.errors import LocalToolError, uninterrupted
from infra.local.ports import check_stack_ports, free_port
from infra.local.stack_environment import apply_environment, child_environment, restore_environment, stack_environment
from infra.local.stack_iam import IamDecisions, iam_decisions, reload_policies, start_gate
from infra.local.stack_pollers import StackPollers
from infra.local.stack_servers import LocalServers
from infra.local.stack_template import DEFAULT_TABLE_NAME, default_flags, local_deployment

# The servers and boto3 are imported when a stack starts, not with this module: so that
# `python -m infra.local_stack` checks its ports (and says which one is taken) within a second.
if TYPE_CHECKING:
    from infra.local.iam.gate import Gate

DEFAULT_DATA_FILE = local_folder() / "dynamodb.jsonl"
# The URL the sample events are signed for; with the gateway running, its own /sms replaces it.
SAMPLE_WEBHOOK_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/v1/sms"


class LocalStack:
    """Start with `with LocalStack() as stack:`; the process environment then points at it.

    The stack is template.yaml deployed locally (infra/local/deployment.py): its tables, queues,
    parameters and flags profile, each function's environment, and, unless `enforce_iam` is False,
    each function's policy, which every local server enforces on the requests that function makes
    (infra/local/iam/; docs/decisions/0023-local-iam.md).

    With `data_file`, the stack owns that file while it runs (see infra/local/data.py): it takes
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
        s3vectors_port: int = 0,
        command: str = "a local stack",
        gateway_wrap: Callable[[Any], Any] | None = None,
        flags_file: Path | None = None,
        real_model: bool = False,
        enforce_iam: bool = True,
        parameters: Mapping[str, str] | None = None,
        api_option: str = "--api-port",
    ) -> None:
        """`api_port` (0 for any free port) also serves the template's API routes and polls the SMS queue;
        `gateway_wrap` wraps the gateway's ASGI app (the memory console, infra/console); `flags_file`
        is the feature flags file the local AppConfig serves (else the template's first version).
        Fixed ports are checked before anything starts: PortInUseError names the taken one and its option.

        `real_model` (the memory benchmark's --aws) leaves the model to the environment: the
        emulator still starts but nothing is pointed at it, and the process keeps its own
        credentials and region (the local servers accept any; their resources are made in that
        region, as moto keeps one set per region). Policies are not enforced then: the process's
        requests carry its own credentials.

        `parameters` override the template's, as `sam deploy --parameter-overrides` does (for example
        `{"WafRateLimiting": "Disabled"}` for a load test from one client). `api_option` is the option
        that changes the API's port in the command that starts this stack (a taken port names it)."""
        check_stack_ports(
            host,
            {"dynamodb": dynamodb_port, "bedrock": bedrock_port, "api": api_port, "twilio": twilio_port,
             "s3vectors": s3vectors_port},
            api_option,
        )  # fmt: skip
        self.data_file = data_file
        self.table_name = table_name
        self.real_model = real_model
        self.enforce_iam = enforce_iam and not real_model
        self.region = (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or resources.LOCAL_REGION
            if real_model
            else resources.LOCAL_REGION
        )
        self.host = host
        self.command = command
        self._lock = DataLock(data_file) if data_file is not None else None
        if data_file is not None and self._lock is not None and not self._lock.try_acquire():
            raise in_use_error(data_file)
        self._loaded = False
        try:
            ports = {"dynamodb": dynamodb_port, "bedrock": bedrock_port, "twilio": twilio_port,
                     "s3vectors": s3vectors_port}  # fmt: skip
            self.servers = LocalServers(host, self.region, ports, chunk_delay_s, self._flags)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        # The servers by name, as tests and tools reach them (stack.bedrock.requests, stack.twilio.sent, ...).
        self.dynamodb, self.bedrock, self.twilio = self.servers.dynamodb, self.servers.bedrock, self.servers.twilio
        self.appconfig, self.s3vectors = self.servers.appconfig, self.servers.s3vectors
        self.api_port = None if api_port is None else (api_port or free_port(host))
        self.gateway_wrap = gateway_wrap
        self.flags_file = flags_file
        self.deployment = local_deployment(
            self.region, table_name, self.dynamodb.url, self.twilio.account_sid, parameters or {}
        )
        self.sms_queue_url = self.deployment.resolve({"Ref": "SmsQueue"})
        self.gate: Gate | None = None
        self._pollers = StackPollers()
        self._saved_vector_changes = -1
        self._saved_env: dict[str, str | None] = {}
        self._saved_session: Any = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    @property
    def api_url(self) -> str:
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.api_port}"  # noqa: S104

    @property
    def webhook_url(self) -> str:
        """The URL Twilio posts texts to: this stack's /sms, or (without an API) the sample events' one."""
        return SAMPLE_WEBHOOK_URL if self.api_port is None else f"{self.api_url}/sms"

    def _flags(self) -> bytes:
        """What the flags profile holds now: the --flags file, or the template's first hosted version."""
        if self.flags_file is not None:
            return self.flags_file.read_bytes()
        return default_flags(self.deployment)

    @property
    def environment(self) -> dict[str, str | None]:
        """What a process needs to use this stack (None: unset); no real AWS credentials are involved
        (infra/local/stack_environment.py)."""
        return stack_environment(self.deployment, self.real_model, self.servers.urls())

    def process_environment(self, logical_id: str | None = None) -> dict[str, str]:
        """The environment of a child process on this stack; with `logical_id`, signing as that function."""
        return child_environment(self.environment, logical_id)

    def __enter__(self) -> "LocalStack":
        try:
            self._start_servers()
            self._create_resources()
            self._saved_env = apply_environment(self.environment)
            if self.enforce_iam:
                import boto3

                from infra.local.iam.identity import new_session

                # Every client the functions make from here on signs as the function running it.
                self._saved_session, boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION, new_session(self.region)
            self._load()
            self._pollers.start_indexing(self._client().describe_table(TableName=self.table_name), self.region)
            if self.api_port is not None:
                self._pollers.start_gateway(
                    self.host, self.api_port, self.gateway_wrap, self.deployment, self.sms_queue_url
                )
            if self.data_file is not None:
                write_state(self.data_file, self.state())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def drain_index(self, timeout_s: float = 60.0) -> None:
        """Wait until the recall indexer has been handed every change written so far."""
        self._pollers.drain_index(timeout_s)

    def decisions(self) -> IamDecisions:
        """What the template's policies refused and granted so far (infra/local/stack_iam.py)."""
        return iam_decisions(self.gate, self.dynamodb.url)

    def reload_policies(self, template_path: Path | None = None) -> None:
        """Enforce the policies of `template_path` (default: template.yaml as it is now) from now on,
        without a restart: after an edit of the template, or to try a policy."""
        if self.gate is None:
            raise LocalToolError("this stack does not enforce the template's policies (--no-iam)")
        reload_policies(self.gate, self.deployment, self.dynamodb.url, template_path)

    def _start_servers(self) -> None:
        policies = None
        if self.enforce_iam:
            self._scratch = tempfile.TemporaryDirectory(prefix="local-iam-")
            self.gate, policies = start_gate(self.deployment, Path(self._scratch.name))
        self.servers.start(self.gate, policies, with_gateway=self.api_port is not None)

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
                self._pollers.stop()
                self.servers.stop()
                if self.enforce_iam and self._saved_env:
                    import boto3

                    boto3.DEFAULT_SESSION = self._saved_session
                restore_environment(self._saved_env)
                if self._scratch is not None:
                    self._scratch.cleanup()
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

    def operator_client(self, service: str = "dynamodb") -> Any:
        """A client of the operator's, who may do anything (loading data, reading what was stored)."""
        return self._client(service)

    def _client(self, service: str = "dynamodb") -> Any:
        return resources.admin_client(service, self.region, self.dynamodb.url)

    def _create_resources(self) -> None:
        resources.create_resources(
            self.deployment,
            self.dynamodb.url,
            self.dynamodb.port,
            self.s3vectors.url,
            self.table_name,
            self.twilio.auth_token,
            self.webhook_url,
        )

    def items(self) -> Iterator[dict[str, Any]]:
        return resources.table_items(self._client(), self.table_name)

    @property
    def vectors_file(self) -> Path | None:
        """Where the recall index is kept beside the data file (it is made from the table's messages)."""
        return None if self.data_file is None else self.data_file.with_suffix(".vectors.json")

    def save(self) -> None:
        """Write every item to `data_file` (one DynamoDB-JSON item a line), and the recall index
        beside it, atomically."""
        if self.data_file is None or self.vectors_file is None:
            return
        resources.save_items(self.data_file, self.items())
        self._saved_vector_changes = resources.save_vectors(
            self.vectors_file, self.s3vectors, self._saved_vector_changes
        )

    def _load(self) -> None:
        if self.vectors_file is not None:
            resources.load_vectors(self.vectors_file, self.s3vectors)
        if self.data_file is None or not self.data_file.exists():
            self._loaded = True
            return
        resources.load_items(self._client(), self.table_name, self.data_file)
        self._loaded = True

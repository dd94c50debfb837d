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

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from infra.local.data import (
    DataFileInUseError,
    DataLock,
    StackState,
    atomic_write,
    local_folder,
    read_items,
    read_state,
    remove_state,
    write_state,
)
from infra.local.deployment import LOCAL_ACCOUNT_ID, LocalDeployment, LocalResource
from infra.local.errors import LocalToolError, run_tool, uninterrupted
from infra.local.flags import FLAGS_FILE_VARIABLE, checked_flags_file
from infra.local.ports import FixedPort, NotAnsweringError, check_answers, check_ports, free_port
from infra.local.terminal import add_verbose_option, log_file_of, logs_line, quiet_terminal

# The servers, boto3 and the gateway are imported when a stack starts, not with this module: so that
# `python -m infra.local_stack` checks its ports (and says which one is taken) within a second.
if TYPE_CHECKING:
    from infra.local.gateway import LocalGateway, QueuePoller
    from infra.local.iam.gate import Gate
    from infra.local.streams import StreamPoller

__all__ = ["LOCAL_AWS_ENVIRONMENT", "LocalDynamoDB", "LocalStack", "end_child", "free_port", "wait_until_listening"]

TABLE_LOGICAL_ID = "ConversationTable"
DEFAULT_TABLE_NAME = "onboarding-memory-local"
RECALL_BUCKET_NAME, RECALL_INDEX_NAME = "onboarding-recall-local", "messages"
DEFAULT_DATA_FILE = local_folder() / "dynamodb.jsonl"
IDEMPOTENCY_TABLE_NAME = "onboarding-idempotency-local"
SMS_QUEUE_NAME = "onboarding-sms-local.fifo"
SMS_DEAD_LETTER_QUEUE_NAME = "onboarding-sms-dlq-local.fifo"
# Short, so a failed text is retried within seconds locally (the template's is 720 s).
LOCAL_QUEUE_VISIBILITY_S = 5
# The flags profile's ids here (AppConfig makes up its own when the stack deploys).
FLAGS_APPLICATION_ID, FLAGS_ENVIRONMENT_ID, FLAGS_PROFILE_ID = "localflg", "localenv", "memory"
# What the template sets for Lambda Web Adapter itself (the local gateway plays its part), not the app.
ADAPTER_VARIABLES = ("AWS_LAMBDA_EXEC_WRAPPER", "AWS_LWA_", "PORT")
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
    "s3vectors": ("the S3 Vectors stand-in", "--s3vectors-port"),
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


@dataclass(frozen=True)
class IamDecisions:
    refusals: list[str]  # each as AWS words it
    granted: dict[tuple[str, str, str], int]  # (function, action, resource) -> how often it was allowed


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
        from infra.local.appconfig import AppConfigStandIn, Profile
        from infra.local.bedrock_emulator import BedrockEmulator
        from infra.local.s3vectors import S3VectorsStandIn
        from infra.local.twilio_emulator import TwilioEmulator

        fixed = {
            "dynamodb": dynamodb_port, "bedrock": bedrock_port, "api": api_port, "twilio": twilio_port,
            "s3vectors": s3vectors_port,
        }  # fmt: skip
        options = {**{name: option for name, (_, option) in PORT_OPTIONS.items()}, "api": api_option}
        check_ports(
            host, [FixedPort(PORT_OPTIONS[name][0], port, options[name]) for name, port in fixed.items() if port]
        )
        self.data_file = data_file
        self.table_name = table_name
        self.real_model = real_model
        self.enforce_iam = enforce_iam and not real_model
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
            self.appconfig = AppConfigStandIn(
                Profile(FLAGS_APPLICATION_ID, FLAGS_ENVIRONMENT_ID, FLAGS_PROFILE_ID), self._flags, None, host=host
            )
            self.s3vectors = S3VectorsStandIn(self.region, LOCAL_ACCOUNT_ID, host=host, port=s3vectors_port)
        except BaseException:
            if self._lock is not None:
                self._lock.release()
            raise
        self.api_port = None if api_port is None else (api_port or free_port(host))
        self.gateway_wrap = gateway_wrap
        self.flags_file = flags_file
        self.deployment = self._deployment(parameters or {})
        self.sms_queue_url = self.deployment.resolve({"Ref": "SmsQueue"})
        self.gate: Gate | None = None
        self._gateway: LocalGateway | None = None
        self._pollers: list[QueuePoller] = []
        self._stream_pollers: list[StreamPoller] = []
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
        return str(
            self.deployment.resolve(_template_resource("FeatureFlagsDefaults")["Properties"]["Content"])
        ).encode()

    def _deployment(self, overrides: Mapping[str, str]) -> LocalDeployment:
        """template.yaml as deployed here: the resources this stack makes, and parameter values."""
        region, account = self.region, LOCAL_ACCOUNT_ID

        def table(name: str) -> LocalResource:
            return LocalResource(name, {"Arn": f"arn:aws:dynamodb:{region}:{account}:table/{name}"})

        def queue(name: str) -> LocalResource:  # moto's queue URLs: the server, the account, the name
            arn = f"arn:aws:sqs:{region}:{account}:{name}"
            return LocalResource(f"{self.dynamodb.url}/{account}/{name}", {"Arn": arn, "QueueName": name})

        bucket_arn = f"arn:aws:s3vectors:{region}:{account}:bucket/{RECALL_BUCKET_NAME}"
        index_arn = f"{bucket_arn}/index/{RECALL_INDEX_NAME}"

        resources = {
            TABLE_LOGICAL_ID: table(self.table_name),
            "IdempotencyTable": table(IDEMPOTENCY_TABLE_NAME),
            "SmsQueue": queue(SMS_QUEUE_NAME),
            "SmsDeadLetterQueue": queue(SMS_DEAD_LETTER_QUEUE_NAME),
            "FeatureFlagsApplication": LocalResource(FLAGS_APPLICATION_ID),
            "FeatureFlagsEnvironment": LocalResource(FLAGS_ENVIRONMENT_ID),
            "FeatureFlagsProfile": LocalResource(FLAGS_PROFILE_ID),
            "RecallVectorBucket": LocalResource(bucket_arn, {"VectorBucketArn": bucket_arn}),
            "RecallIndex": LocalResource(index_arn, {"IndexArn": index_arn}),
        }
        # A variable already set stands for the parameter the template sets it from (BEDROCK_MODEL_ID
        # for BedrockModelId, ...), so the policies are resolved with the value the functions use.
        parameters = {
            parameter: os.environ[name] for name, parameter in _parameter_variables().items() if name in os.environ
        }
        parameters["TwilioAccountSid"] = self.twilio.account_sid  # the SMS channel exists: the stand-in's account
        parameters.update(overrides)
        first = LocalDeployment(region, resources, parameters)
        name = first.resolve(_template_resource("TwilioWebhookUrlParameter")["Properties"]["Name"])
        return LocalDeployment(region, {**resources, "TwilioWebhookUrlParameter": LocalResource(name)}, parameters)

    @property
    def environment(self) -> dict[str, str | None]:
        """What a process needs to use this stack (None: unset); no real AWS credentials are involved.

        Every function's variables as the template sets them (they share this process, so the
        template must not give two functions one name with two values), then the local endpoints."""
        model: dict[str, str | None] = (
            {"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region}
            if self.real_model
            else {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock.url, **LOCAL_AWS_ENVIRONMENT}
        )
        return {
            **self._function_variables(),
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.url,
            **model,
            "AWS_ENDPOINT_URL_SQS": self.dynamodb.url,
            "AWS_ENDPOINT_URL_SSM": self.dynamodb.url,
            "AWS_ENDPOINT_URL_APPCONFIGDATA": self.appconfig.url,
            "AWS_ENDPOINT_URL_S3VECTORS": self.s3vectors.url,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": self.dynamodb.url,
            "TWILIO_API_BASE_URL": self.twilio.url,
            # As deployed: the webhook reads its URL from its parameter, the flags come from AppConfig.
            "TWILIO_WEBHOOK_URL": None,
            FLAGS_FILE_VARIABLE: None,
            **{name: os.environ.get(name, value) for name, value in LOCAL_TIMEOUTS.items()},
        }

    def process_environment(self, logical_id: str | None = None) -> dict[str, str]:
        """The environment of a child process on this stack: this process's with the stack's applied
        (unset names removed); with `logical_id`, signing as that function, as Lambda gives each
        function its role's credentials (infra/local/iam/identity.py)."""
        from infra.local.iam.identity import access_key_of

        environment = dict(os.environ)
        for name, value in self.environment.items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        if logical_id is not None:
            environment["AWS_ACCESS_KEY_ID"] = access_key_of(logical_id)
        return environment

    def _function_variables(self) -> dict[str, str]:
        variables: dict[str, str] = {}
        literal = _literal_variables()
        for logical_id in self.deployment.functions():
            for name, value in self.deployment.function_environment(logical_id).items():
                if name.startswith(ADAPTER_VARIABLES):
                    continue
                if name in literal and name in os.environ:  # a literal of the template: a value already set wins
                    value = os.environ[name]
                if variables.get(name, value) != value:
                    raise LocalToolError(f"template.yaml gives {name} two values ({variables[name]!r}, {value!r})")
                variables[name] = value
        return variables

    def __enter__(self) -> "LocalStack":
        try:
            self._start_servers()
            self._create_resources()
            for name, value in self.environment.items():
                self._saved_env[name] = os.environ.get(name)
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            if self.enforce_iam:
                import boto3

                from infra.local.iam.identity import new_session

                # Every client the functions make from here on signs as the function running it.
                self._saved_session, boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION, new_session(self.region)
            self._load()
            self._start_indexing()
            if self.api_port is not None:
                from infra.local.gateway import LocalGateway, QueuePoller, queue_subscribers
                from infra.local.waf import local_waf

                waf = local_waf(self.deployment)
                self._gateway = LocalGateway(self.host, self.api_port, self.gateway_wrap, waf).start()
                self._pollers = [
                    QueuePoller(logical_id, self.sms_queue_url).start() for logical_id in queue_subscribers("SmsQueue")
                ]
            if self.data_file is not None:
                write_state(self.data_file, self.state())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start_indexing(self) -> None:
        """The template's stream subscriptions (the recall indexer), from the stream's end (LATEST)."""
        from infra.local.streams import StreamPoller, stream_subscriptions

        stream_arn = self._client().describe_table(TableName=self.table_name)["Table"].get("LatestStreamArn")
        if stream_arn is None:
            return
        self._stream_pollers = [
            StreamPoller(logical_id, stream_arn, self.region, properties).start()
            for logical_id, properties in stream_subscriptions(TABLE_LOGICAL_ID)
        ]

    def drain_index(self, timeout_s: float = 60.0) -> None:
        """Wait until the recall indexer has been handed every change written so far."""
        for stream_poller in self._stream_pollers:
            stream_poller.drain(timeout_s)

    def decisions(self) -> "IamDecisions":
        """What the template's policies refused (the latest few hundred of each server, as AWS words
        each) and granted so far (how often each function used each action)."""
        if self.gate is None:
            return IamDecisions([], {})
        import httpx

        from infra.local.iam.wsgi import DECISIONS_PATH, decisions

        granted: dict[tuple[str, str, str], int] = {}
        refusals: list[str] = []
        for server in (httpx.get(self.dynamodb.url + DECISIONS_PATH, timeout=FIRST_ANSWER_TIMEOUT_S).json(),
                       decisions(self.gate)):  # fmt: skip
            refusals += server["refusals"]
            for logical_id, action, resource, count in server["granted"]:
                grant = (logical_id, action, resource)
                granted[grant] = granted.get(grant, 0) + count
        return IamDecisions(refusals, granted)

    def reload_policies(self, template_path: Path | None = None) -> None:
        """Enforce the policies of `template_path` (default: template.yaml as it is now) from now on,
        without a restart: after an edit of the template, or to try a policy."""
        if self.gate is None:
            raise LocalToolError("this stack does not enforce the template's policies (--no-iam)")
        import dataclasses

        import httpx

        from infra.local.iam.gate import gate_from, gate_settings
        from infra.local.iam.wsgi import POLICIES_PATH
        from infra.local.template import TEMPLATE_PATH, load_template

        path = template_path or TEMPLATE_PATH
        load_template.cache_clear()
        settings = gate_settings(dataclasses.replace(self.deployment, template_path=path))
        httpx.put(
            self.dynamodb.url + POLICIES_PATH, content=json.dumps(settings), timeout=FIRST_ANSWER_TIMEOUT_S
        ).raise_for_status()
        self.gate.replace(gate_from(settings))

    def _start_servers(self) -> None:
        policies = None
        if self.enforce_iam:
            from infra.local.iam.gate import gate_from, gate_settings

            settings = gate_settings(self.deployment)
            self._scratch = tempfile.TemporaryDirectory(prefix="local-iam-")
            policies = Path(self._scratch.name) / "policies.json"
            policies.write_text(json.dumps(settings), encoding="utf-8")
            self.gate = gate_from(settings)
            self.bedrock.gate = self.gate
            self.appconfig.gate = self.gate
            self.s3vectors.gate = self.gate
        self.dynamodb.launch(policies=policies)
        # While moto's server starts (a second or two), the rest: the in-process servers, and the
        # gateway's imports if it will serve.
        self.bedrock.start()
        self.twilio.start()
        self.appconfig.start()
        self.s3vectors.start()
        if self.api_port is not None:
            import infra.local.gateway  # noqa: F401
        self.dynamodb.wait_listening()

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
                for stream_poller in self._stream_pollers:
                    stream_poller.stop()
                if self._gateway is not None:
                    self._gateway.stop()
                self.s3vectors.stop()
                self.appconfig.stop()
                self.twilio.stop()
                self.bedrock.stop()
                self.dynamodb.stop()
                if self.enforce_iam and self._saved_env:
                    import boto3

                    boto3.DEFAULT_SESSION = self._saved_session
                for name, value in self._saved_env.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
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

    def _client(self, service: str = "dynamodb", first: bool = False, endpoint_url: str | None = None) -> Any:
        """A client of the operator's (the stack's own administration: CloudFormation's part)."""
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
            endpoint_url=endpoint_url or self.dynamodb.url,
            aws_access_key_id=LOCAL_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key="local",  # noqa: S106 - the local server's dummy credentials
            config=config,
        )

    def _create_resources(self) -> None:
        """What the template makes that the functions use: the tables, the queue and its dead-letter
        queue, and the parameters the SMS functions read (the Twilio token is the stand-in's)."""
        from botocore.exceptions import BotoCoreError

        from infra.local.template import table_create_request

        try:
            check_answers(
                self.dynamodb.url, f"the local DynamoDB server (port {self.dynamodb.port})", FIRST_ANSWER_TIMEOUT_S
            )
            self._client(first=True).create_table(**table_create_request(TABLE_LOGICAL_ID, self.table_name))
        except (NotAnsweringError, BotoCoreError) as error:
            raise LocalToolError(str(error)) from None
        dynamodb = self._client()
        dynamodb.create_table(**table_create_request("IdempotencyTable", IDEMPOTENCY_TABLE_NAME))
        sqs = self._client("sqs")
        for logical_id in ("SmsDeadLetterQueue", "SmsQueue"):
            name, attributes = self._queue_request(logical_id)
            created = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            expected = self.deployment.resolve({"Ref": logical_id})
            if created != expected:
                raise LocalToolError(f"the local queue {name} is at {created}, not at {expected}")
        self._create_recall_index()
        ssm = self._client("ssm")
        token_parameter = self.deployment.parameter("TwilioAuthTokenParameterName")
        ssm.put_parameter(Name=token_parameter, Value=self.twilio.auth_token, Type="SecureString", Overwrite=True)
        webhook_parameter = self.deployment.resolve({"Ref": "TwilioWebhookUrlParameter"})
        ssm.put_parameter(Name=webhook_parameter, Value=self.webhook_url, Type="String", Overwrite=True)

    def _create_recall_index(self) -> None:
        """The vector bucket and index as the template declares them (the size a value already set
        for EMBEDDING_DIMENSIONS gives, as for every parameter a variable stands for)."""
        properties = self.deployment.resolve(_template_resource("RecallIndex")["Properties"])
        vectors = self._client("s3vectors", endpoint_url=self.s3vectors.url)
        vectors.create_vector_bucket(vectorBucketName=RECALL_BUCKET_NAME)
        vectors.create_index(
            vectorBucketName=RECALL_BUCKET_NAME,
            indexName=RECALL_INDEX_NAME,
            dataType=properties["DataType"],
            dimension=int(properties["Dimension"]),
            distanceMetric=properties["DistanceMetric"],
            metadataConfiguration={
                "nonFilterableMetadataKeys": properties["MetadataConfiguration"]["NonFilterableMetadataKeys"]
            },
        )

    def _queue_request(self, logical_id: str) -> tuple[str, dict[str, str]]:
        """(name, CreateQueue attributes) of a queue as the template declares it."""
        properties = self.deployment.resolve(_template_resource(logical_id)["Properties"])
        attributes = {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in {
            "FifoQueue": properties.get("FifoQueue"),
            "MessageRetentionPeriod": properties.get("MessageRetentionPeriod"),
            "VisibilityTimeout": LOCAL_QUEUE_VISIBILITY_S,
            "RedrivePolicy": json.dumps(properties["RedrivePolicy"]) if "RedrivePolicy" in properties else None,
        }.items() if value is not None}  # fmt: skip
        return self.deployment.resources[logical_id].attributes["QueueName"], attributes

    def items(self) -> Iterator[dict[str, Any]]:
        for page in self._client().get_paginator("scan").paginate(TableName=self.table_name):
            yield from page["Items"]

    @property
    def vectors_file(self) -> Path | None:
        """Where the recall index is kept beside the data file (it is made from the table's messages)."""
        return None if self.data_file is None else self.data_file.with_suffix(".vectors.json")

    def save(self) -> None:
        """Write every item to `data_file` (one DynamoDB-JSON item a line), and the recall index
        beside it, atomically."""
        if self.data_file is None or self.vectors_file is None:
            return
        atomic_write(self.data_file, (json.dumps(item, ensure_ascii=False) + "\n" for item in self.items()))
        if self.s3vectors.changes != self._saved_vector_changes or not self.vectors_file.exists():
            self._saved_vector_changes = self.s3vectors.changes
            atomic_write(self.vectors_file, [json.dumps(self.s3vectors.dump())])

    def _load(self) -> None:
        if self.vectors_file is not None and self.vectors_file.exists():
            self.s3vectors.load(json.loads(self.vectors_file.read_text(encoding="utf-8")))
        if self.data_file is None or not self.data_file.exists():
            self._loaded = True
            return
        client = self._client()
        items = read_items(self.data_file)  # all of it first: a damaged file is moved aside, not half loaded
        for start in range(0, len(items), 25):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            pending: dict[str, Any] = {self.table_name: requests}
            while pending:
                pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
        self._loaded = True


def _template_resource(logical_id: str) -> dict[str, Any]:
    from infra.local.template import resource

    return resource(logical_id)


def _declared_variables() -> dict[str, Any]:
    """Every function variable the template declares (Globals and each function), as written."""
    from infra.local.template import load_template

    template = load_template()
    blocks = [template.get("Globals", {}).get("Function", {})] + [
        body.get("Properties", {})
        for body in template["Resources"].values()
        if body["Type"] == "AWS::Serverless::Function"
    ]
    return {
        name: value for block in blocks for name, value in block.get("Environment", {}).get("Variables", {}).items()
    }


def _parameter_variables() -> dict[str, str]:
    """Each function variable the template sets from a parameter alone, with that parameter."""
    from infra.local.template import load_template

    parameters = load_template().get("Parameters", {})
    return {
        name: value["Ref"]
        for name, value in _declared_variables().items()
        if isinstance(value, dict) and value.get("Ref") in parameters
    }


def _literal_variables() -> set[str]:
    """The function variables the template sets to a plain value."""
    return {name for name, value in _declared_variables().items() if not isinstance(value, dict)}


def add_iam_option(parser: argparse.ArgumentParser) -> None:
    """The option that turns the template's policies off, the same on every local tool."""
    parser.add_argument(
        "--no-iam",
        action="store_true",
        help="do not enforce the template's IAM policies on the local stack (for experiments; docs/deploy.md)",
    )


def describe_iam(enforced: bool) -> str:
    if not enforced:
        return "IAM: off (--no-iam): every function may do anything here, which AWS would not allow."
    return (
        "IAM: each function's requests are checked against its policy in template.yaml (--no-iam turns this off);\n"
        "  the keys above are the operator's, who may do anything; AWS_ACCESS_KEY_ID=LOCALFN<Function> acts as one."
    )


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
    parser.add_argument("--s3vectors-port", type=int, default=8003, help="the recall index (S3 Vectors stand-in)")
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on; 0.0.0.0 lets `sam local invoke` containers reach it"
    )
    parser.add_argument(
        "--flags",
        type=Path,
        help="feature flags JSON file (docs/rollout.md); edits apply within FEATURE_FLAGS_MAX_AGE_S",
    )
    add_iam_option(parser)
    add_verbose_option(parser)
    arguments = parser.parse_args()
    flags_file = None if arguments.flags is None else checked_flags_file(arguments.flags)
    signal.signal(signal.SIGTERM, _interrupt)
    # Also when started in the background of a script, which would have Ctrl-C ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with (
        quiet_terminal(log_file_of(arguments.data_file, "local_stack"), arguments.verbose) as terminal,
        LocalStack(
            arguments.data_file,
            0.02,
            dynamodb_port=arguments.dynamodb_port,
            bedrock_port=arguments.bedrock_port,
            host=arguments.host,
            api_port=arguments.api_port,
            twilio_port=arguments.twilio_port,
            s3vectors_port=arguments.s3vectors_port,
            command="infra.local_stack",
            flags_file=flags_file,
            enforce_iam=not arguments.no_iam,
        ) as stack,
    ):
        say = partial(print, file=terminal)
        say(f"Local stack running. API: {stack.api_url} (OpenAPI at {stack.api_url}/openapi.json;")
        say("  send `Authorization: Bearer <any user id>`), SMS webhook: POST /sms.")
        say(f"Data: {arguments.data_file} (saved every 5 s and on exit). infra.chat, infra.invoke, infra.sms and")
        say("  infra.inspect_prompt use this stack while it runs. Point another process at it with:")
        for name, value in stack.environment.items():
            say(f"  export {name}={value}" if value is not None else f"  unset {name}")
        if flags_file is not None:
            say(f"Flags: {flags_file}, served by the local AppConfig (edits apply within FEATURE_FLAGS_MAX_AGE_S).")
        say(describe_iam(stack.enforce_iam))
        say(logs_line(log_file_of(arguments.data_file, "local_stack"), arguments.verbose))
        say("Ctrl-C stops it and saves the table.", flush=True)
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

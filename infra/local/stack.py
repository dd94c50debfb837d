"""The embedded local stack: template.yaml deployed on this machine (docs/decisions/0004-local-stack.md).

moto's server over HTTP in a child process (DynamoDB and its stream, SQS, SSM; one DynamoDB request
applied at a time, as DynamoDB does: infra/local/dynamodb_server.py), and on loopback threads the
Bedrock emulator (the coach and the embedding model), the S3 Vectors stand-in (the recall index),
the Twilio stand-in and the local AppConfig (the flags profile); the recall indexer fed from the
table's stream; and, on request, the local gateway (the template's API routes and WAF rules) with
Lambda's SQS poller. Each function's requests are checked against its policy in the template
(infra/local/iam/; decision 0023) unless `enforce_iam` is False.

Code under test is pointed at it only through AWS's standard endpoint variables
(`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, ...), exactly as it would be at
any other endpoint; Twilio's client through `TWILIO_API_BASE_URL`. The stack's own administration
(making what the template makes, loading and saving the table) stands in for CloudFormation and
backups: it is the operator's, not application code.

With `data_file`, the conversation table survives restarts (infra/local/data.py): it is loaded from
that file and its journal on start, each `save()` appends what changed since the last one (read
from the table's stream: a save costs what changed, not the table), and the snapshot is written
whole when the stack stops. The recall index is kept beside it (written when the stack stops), and
so are the check-in schedules (written on each `save()` that finds them changed): AWS loses neither
when a function restarts. Run `python -m infra.local_stack` to keep one running for other processes.
"""

import argparse
import dataclasses
import json
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from infra.local.data import (
    DataLock,
    StackState,
    append_changes,
    atomic_write,
    change_line,
    in_use_error,
    journal_path,
    local_folder,
    read_table,
    remove_state,
    write_snapshot,
    write_state,
)
from infra.local.deployment import (
    DEFAULT_TABLE_NAME,
    FLAGS_APPLICATION_ID,
    FLAGS_ENVIRONMENT_ID,
    FLAGS_PROFILE_ID,
    IDEMPOTENCY_TABLE_NAME,
    LOCAL_ACCOUNT_ID,
    LOCAL_AWS_ENVIRONMENT,
    LOCAL_REGION,
    RECALL_BUCKET_NAME,
    TABLE_LOGICAL_ID,
    default_flags,
    function_variables,
    local_deployment,
    queue_request,
    recall_index_request,
)
from infra.local.dynamodb_process import FIRST_ANSWER_TIMEOUT_S, LocalDynamoDB
from infra.local.errors import LocalToolError, uninterrupted
from infra.local.flags import FLAGS_FILE_VARIABLE
from infra.local.ports import FixedPort, NotAnsweringError, bound, check_answers, listen_on, port_of, stack_ports

# The servers, boto3 and the gate are imported when a stack starts, not with this module: so that
# `python -m infra.local_stack` checks its ports (and says which one is taken) within a second.
if TYPE_CHECKING:
    from infra.local.check_in_clock import CheckInClock, Ticking
    from infra.local.event_sources import QueuePoller, StreamPoller
    from infra.local.gateway import LocalGateway
    from infra.local.iam.gate import Gate

DEFAULT_DATA_FILE = local_folder() / "dynamodb.jsonl"
# The URL the sample events are signed for; with the gateway running, its own /sms replaces it.
SAMPLE_WEBHOOK_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/v1/sms"
# moto copies its whole table for every transaction, so on a big local table (the benchmark's, a
# long-lived data file) an answer can take seconds that DynamoDB answers in milliseconds: locally the
# table client waits longer, and the turn's deadline keeps room for it. A value already set wins.
LOCAL_TIMEOUTS = {"DYNAMODB_READ_TIMEOUT_S": "10", "TURN_STORE_RESERVE_S": "35", "TURN_DEADLINE_S": "90"}
STREAM_PAGE = 1000  # stream records read at a time when a save collects what changed


@dataclass(frozen=True)
class IamDecisions:
    refusals: list[str]  # each as AWS words it
    granted: dict[tuple[str, str, str], int]  # (function, action, resource) -> how often it was allowed


class LocalStack:
    """Start with `with LocalStack() as stack:`; the process environment then points at it.

    With `data_file`, the stack owns that file while it runs (infra/local/data.py): it takes the
    file's lock (DataFileInUseError if another stack holds it), loads it, publishes its state for
    other tools to attach to, journals the table's changes on `save()` and writes it whole when it
    stops, whatever stops it (Ctrl-C included)."""

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
        command: str = "another tool",
        gateway_wrap: Callable[[Any], Any] | None = None,
        flags_file: Path | None = None,
        real_model: bool = False,
        enforce_iam: bool = True,
        parameters: Mapping[str, str] | None = None,
        api_option: str = "--api-port",
    ) -> None:
        """Ports: 0 (or None) for any free one, which the system chooses as the server binds it;
        `self.ports` then holds the ports each server got. `api_port` (None: none) also serves the
        template's API routes and polls the SMS queue; `gateway_wrap` wraps the gateway's ASGI app
        (the memory console, infra/console); `flags_file` is the feature flags file the local
        AppConfig serves (else the template's first version). Every server binds its socket here,
        before any starts serving, and a taken port is one line (PortInUseError) naming it, its
        option (`api_option` for the API's, the option of the command that starts this stack) and,
        if it is one of ours, the stack that holds it.

        `real_model` (the memory benchmark's --aws) leaves the model to the environment: the
        emulator still starts but nothing is pointed at it, and the process keeps its own
        credentials and region (the local servers accept any; their resources are made in that
        region, as moto keeps one set per region). Policies are not enforced then: the process's
        requests carry its own credentials.

        `parameters` override the template's, as `sam deploy --parameter-overrides` does (for example
        `{"WafRateLimiting": "Disabled"}` for a load test from one client)."""
        given = {"dynamodb": dynamodb_port, "bedrock": bedrock_port, "twilio": twilio_port, "s3vectors": s3vectors_port}
        self.ports = stack_ports(given if api_port is None else {**given, "api": api_port}, api_option)
        self.data_file, self.table_name, self.host, self.command = data_file, table_name, host, command
        self.real_model = real_model
        self.enforce_iam = enforce_iam and not real_model
        environment_region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        self.region = (environment_region or LOCAL_REGION) if real_model else LOCAL_REGION
        self._loopback: list[Any] = []  # the in-process stand-ins, started with the stack
        self._closers: list[Callable[[], None]] = []  # what lets each bound socket go, whatever stops the stack
        self._api_listener: socket.socket | None = None
        self._lock = DataLock(data_file) if data_file is not None else None
        try:
            # The sockets first: a taken port is told before anything is written beside the data file.
            self._make_servers(chunk_delay_s)
            if data_file is not None and self._lock is not None and not self._lock.try_acquire():
                raise in_use_error(data_file)
        except BaseException:
            self._close_servers()
            raise
        self.api_port = None if self._api_listener is None else port_of(self._api_listener)
        self.gateway_wrap = gateway_wrap
        self.flags_file = flags_file
        self.deployment = local_deployment(
            self.region, table_name, self.dynamodb.url, self.twilio.account_sid, parameters or {}
        )
        self.sms_queue_url = self.deployment.resolve({"Ref": "SmsQueue"})
        self.gate: Gate | None = None
        self.gateway: LocalGateway | None = None
        self.queue_pollers: list[QueuePoller] = []
        self.stream_pollers: list[StreamPoller] = []
        self.check_in_clock: CheckInClock | None = None  # fires the check-in schedules (advance: /later)
        self._ticking: Ticking | None = None
        self._changes: str | None = None  # the stream's iterator from which `save()` reads what changed
        self._streams: Any = None
        self._kept_schedules: str | None = None  # the schedules file's text as last read or written
        self._loaded = False
        self._saved_env: dict[str, str | None] = {}
        self._saved_session: Any = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def _make_servers(self, chunk_delay_s: float) -> None:
        """Each server's socket bound now, on its port or on one the system chooses, and the port it
        got read back from the socket: moto's handed to its process when it starts, the API's to the
        gateway, the stand-ins' their own."""
        from infra.local.appconfig import AppConfigStandIn, Profile
        from infra.local.bedrock_emulator import BedrockEmulator
        from infra.local.s3vectors import S3VectorsStandIn
        from infra.local.twilio_emulator import TwilioEmulator

        host, asked = self.host, self.ports

        def made(name: str, make: Callable[[int], Any]) -> Any:
            server = bound(asked[name], host, lambda: make(asked[name].port))
            self._loopback.append(server)
            self._closers.append(server.stop)
            return server

        self.dynamodb = bound(asked["dynamodb"], host, lambda: LocalDynamoDB(host=host, port=asked["dynamodb"].port))
        self._closers.append(self.dynamodb.stop)
        self.bedrock = made("bedrock", lambda port: BedrockEmulator(host=host, port=port, chunk_delay_s=chunk_delay_s))
        self.twilio = made("twilio", lambda port: TwilioEmulator(host=host, port=port))
        self.s3vectors = made(
            "s3vectors", lambda port: S3VectorsStandIn(self.region, LOCAL_ACCOUNT_ID, host=host, port=port)
        )
        if "api" in asked:
            self._api_listener = bound(asked["api"], host, lambda: listen_on(host, asked["api"].port))
            self._closers.append(self._api_listener.close)
        profile = Profile(FLAGS_APPLICATION_ID, FLAGS_ENVIRONMENT_ID, FLAGS_PROFILE_ID)
        self.appconfig = AppConfigStandIn(profile, self._flags, None, host=host)  # any free port, bound now
        self._loopback.append(self.appconfig)
        self._closers.append(self.appconfig.stop)
        got = {
            "dynamodb": self.dynamodb.port,
            "bedrock": self.bedrock.port,
            "twilio": self.twilio.port,
            "s3vectors": self.s3vectors.port,
        }
        if self._api_listener is not None:
            got["api"] = port_of(self._api_listener)
        self.ports = {name: FixedPort(fixed.what, got[name], fixed.option) for name, fixed in asked.items()}

    def _close_servers(self) -> None:
        for close in self._closers:
            close()

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
        """What a process needs to use this stack (None: unset): every function's variables as the
        template sets them, then the local endpoints through AWS's standard variables. No real AWS
        credentials are involved; with `real_model`, the model is left to the environment."""
        region = self.deployment.region
        model: dict[str, str | None] = (
            {"AWS_REGION": region, "AWS_DEFAULT_REGION": region}
            if self.real_model
            else {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.bedrock.url, **LOCAL_AWS_ENVIRONMENT}
        )
        return {
            **function_variables(self.deployment),
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.url,
            **model,
            "AWS_ENDPOINT_URL_SQS": self.dynamodb.url,
            "AWS_ENDPOINT_URL_SSM": self.dynamodb.url,
            "AWS_ENDPOINT_URL_APPCONFIGDATA": self.appconfig.url,
            "AWS_ENDPOINT_URL_S3VECTORS": self.s3vectors.url,
            "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": self.dynamodb.url,
            "AWS_ENDPOINT_URL_SCHEDULER": self.dynamodb.url,
            "TWILIO_API_BASE_URL": self.twilio.url,
            # As deployed: the webhook reads its URL from its parameter, the flags come from AppConfig.
            "TWILIO_WEBHOOK_URL": None,
            FLAGS_FILE_VARIABLE: None,
            **{name: os.environ.get(name, value) for name, value in LOCAL_TIMEOUTS.items()},
        }

    def process_environment(self, logical_id: str | None = None) -> dict[str, str]:
        """This process's environment with the stack's applied (unset names removed), for a child
        process; with `logical_id`, signing as that function, as Lambda gives each function its
        role's credentials (infra/local/iam/identity.py)."""
        from infra.local.iam.identity import access_key_of

        child = dict(os.environ)
        for name, value in self.environment.items():
            if value is None:
                child.pop(name, None)
            else:
                child[name] = value
        if logical_id is not None:
            child["AWS_ACCESS_KEY_ID"] = access_key_of(logical_id)
        return child

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
            self._start_pollers()
            if self.data_file is not None:
                write_state(self.data_file, self.state())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with uninterrupted():
            try:
                if self.data_file is not None:
                    remove_state(self.data_file)  # first, so that no tool attaches to a stack that is stopping
                self._stop_pollers()  # then nothing writes while the table is saved
                if self._loaded:  # a stack that failed before loading its file must not overwrite it
                    self._save_or_warn(self.compact)
            finally:
                self._close_servers()
                from infra.local.lambda_runner import end_environments

                # Its functions' warm modules hold clients with connections to the servers just closed.
                end_environments("AWS_ENDPOINT_URL_DYNAMODB", self.dynamodb.url)
                if self.enforce_iam and self._saved_env:
                    import boto3

                    boto3.DEFAULT_SESSION = self._saved_session
                restore_environment(self._saved_env)
                if self._scratch is not None:
                    self._scratch.cleanup()
                if self._lock is not None:
                    self._lock.release()

    # --- the servers, and what runs beside them --------------------------------------------------

    def _start_servers(self) -> None:
        """All of them, behind the template's policies (the in-process ones through the gate, moto's
        through the policies written to a file it reads); the rest start while moto's imports."""
        policies = None
        if self.enforce_iam:
            from infra.local.iam.gate import gate_from, gate_settings

            self._scratch = tempfile.TemporaryDirectory(prefix="local-iam-")
            settings = gate_settings(self.deployment)
            policies = Path(self._scratch.name) / "policies.json"
            policies.write_text(json.dumps(settings), encoding="utf-8")
            self.gate = gate_from(settings)
            self.bedrock.gate = self.appconfig.gate = self.s3vectors.gate = self.gate
        self.dynamodb.launch(policies=policies)
        for server in self._loopback:
            server.start()
        if self.api_port is not None:
            import infra.local.gateway  # noqa: F401 - its imports, while moto's server starts
        self.dynamodb.wait_listening()

    def _start_pollers(self) -> None:
        """As Lambda's event source mappings and API Gateway do: the template's stream subscriptions
        (the recall indexer, from the stream's end), and on request the API routes (with the
        template's WAF rules) and the SMS queue's subscribers."""
        from infra.local.event_sources import QueuePoller, StreamPoller, subscriptions

        stream_arn = self._stream_arn()
        if stream_arn is not None:
            self.stream_pollers = [
                StreamPoller(logical_id, stream_arn, self.region, properties).start()
                for logical_id, properties in subscriptions("DynamoDB", f"{TABLE_LOGICAL_ID}.StreamArn", "Stream")
            ]
        if self.api_port is not None:
            from infra.local.gateway import LocalGateway
            from infra.local.waf import local_waf

            listener = self._api_listener
            if listener is None:  # bound with the other sockets whenever api_port is set
                raise LocalToolError("the API's socket was not bound")
            self.gateway = LocalGateway(listener, self.gateway_wrap, local_waf(self.deployment)).start()
            self.queue_pollers = [
                QueuePoller(logical_id, self.sms_queue_url).start()
                for logical_id, _ in subscriptions("SQS", "SmsQueue.Arn", "Queue")
            ]
        # EventBridge Scheduler's part: the schedules the functions made fire CheckInFunction,
        # on the stack's clock (real time, or ahead of it after `advance`).
        from infra.local.check_in_clock import CheckInClock, Ticking
        from infra.local.lambda_runner import invoke

        clock = CheckInClock(
            self.operator_client("scheduler"), self._schedule_group, lambda event: invoke("CheckInFunction", event)
        )
        self.check_in_clock = clock
        if self.api_port is not None:
            self._ticking = Ticking(clock).start()

    def _stop_pollers(self) -> None:
        for poller in self.queue_pollers:
            poller.stop()
        for stream_poller in self.stream_pollers:
            stream_poller.stop()
        if self.gateway is not None:
            self.gateway.stop()
        if self._ticking is not None:
            self._ticking.stop()
        self.queue_pollers, self.stream_pollers, self.gateway, self._ticking = [], [], None, None

    def drain_index(self, timeout_s: float = 60.0) -> None:
        """Wait until the recall indexer has been handed every change written so far."""
        for stream_poller in self.stream_pollers:
            stream_poller.drain(timeout_s)

    # --- the template's policies ----------------------------------------------------------------

    def decisions(self) -> IamDecisions:
        """What the template's policies refused (the latest few hundred of each server, as AWS words
        each) and granted so far (how often each function used each action)."""
        if self.gate is None:
            return IamDecisions([], {})
        import httpx

        from infra.local.iam.gate import DECISIONS_PATH, decisions

        granted: dict[tuple[str, str, str], int] = {}
        refusals: list[str] = []
        moto = httpx.get(self.dynamodb.url + DECISIONS_PATH, timeout=FIRST_ANSWER_TIMEOUT_S).json()
        for server in (moto, decisions(self.gate)):
            refusals += server["refusals"]
            for logical_id, action, resource, count in server["granted"]:
                granted[logical_id, action, resource] = granted.get((logical_id, action, resource), 0) + count
        return IamDecisions(refusals, granted)

    def reload_policies(self, template_path: Path | None = None) -> None:
        """Enforce the policies of `template_path` (default: template.yaml as it is now) from now on,
        without a restart, in moto's process and in this one's servers: after an edit of the
        template, or to try a policy."""
        if self.gate is None:
            raise LocalToolError("this stack does not enforce the template's policies (--no-iam)")
        import httpx

        from infra.local.iam.gate import POLICIES_PATH, gate_from, gate_settings
        from infra.local.template import TEMPLATE_PATH, load_template

        load_template.cache_clear()
        settings = gate_settings(dataclasses.replace(self.deployment, template_path=template_path or TEMPLATE_PATH))
        httpx.put(
            self.dynamodb.url + POLICIES_PATH, content=json.dumps(settings), timeout=FIRST_ANSWER_TIMEOUT_S
        ).raise_for_status()
        self.gate.replace(gate_from(settings))

    # --- what the template makes, and the data file ---------------------------------------------

    def operator_client(self, service: str = "dynamodb") -> Any:
        """A client of the operator's, who may do anything (loading data, reading what was stored)."""
        return admin_client(service, self.region, self.dynamodb.url)

    def _create_resources(self) -> None:
        """What the template makes that the functions use: the tables, the queue and its dead-letter
        queue, the recall index, and the parameters the SMS functions read (the Twilio token is the
        stand-in's). The first request to the fresh server gets one short try."""
        from botocore.exceptions import BotoCoreError

        from infra.local.template import table_create_request

        deployment, url = self.deployment, self.dynamodb.url
        try:
            check_answers(url, f"the local DynamoDB server (port {self.dynamodb.port})", FIRST_ANSWER_TIMEOUT_S)
            first = admin_client("dynamodb", self.region, url, first=True)
            first.create_table(**table_create_request(TABLE_LOGICAL_ID, self.table_name))
        except (NotAnsweringError, BotoCoreError) as error:
            raise LocalToolError(str(error)) from None
        self.operator_client().create_table(**table_create_request("IdempotencyTable", IDEMPOTENCY_TABLE_NAME))
        sqs = self.operator_client("sqs")
        for logical_id in ("SmsDeadLetterQueue", "SmsQueue"):
            name, attributes = queue_request(deployment, logical_id)
            created = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
            expected = deployment.resolve({"Ref": logical_id})
            if created != expected:
                raise LocalToolError(f"the local queue {name} is at {created}, not at {expected}")
        vectors = admin_client("s3vectors", self.region, self.s3vectors.url)
        vectors.create_vector_bucket(vectorBucketName=RECALL_BUCKET_NAME)
        vectors.create_index(**recall_index_request(deployment))
        ssm = self.operator_client("ssm")
        token_parameter = deployment.parameter("TwilioAuthTokenParameterName")
        ssm.put_parameter(Name=token_parameter, Value=self.twilio.auth_token, Type="SecureString", Overwrite=True)
        webhook_parameter = deployment.resolve({"Ref": "TwilioWebhookUrlParameter"})
        ssm.put_parameter(Name=webhook_parameter, Value=self.webhook_url, Type="String", Overwrite=True)
        self.operator_client("scheduler").create_schedule_group(Name=self._schedule_group)

    def _stream_arn(self) -> str | None:
        table = self.operator_client().describe_table(TableName=self.table_name)["Table"]
        return table.get("LatestStreamArn")  # type: ignore[no-any-return]

    def items(self) -> Iterator[dict[str, Any]]:
        for page in self.operator_client().get_paginator("scan").paginate(TableName=self.table_name):
            yield from page["Items"]

    @property
    def vectors_file(self) -> Path | None:
        """Where the recall index is kept beside the data file (it is made from the table's messages)."""
        return None if self.data_file is None else self.data_file.with_suffix(".vectors.json")

    @property
    def schedules_file(self) -> Path | None:
        """Where the check-in schedules are kept beside the data file (moto's scheduler holds them in
        memory; infra/local/check_in_clock.py)."""
        return None if self.data_file is None else self.data_file.with_suffix(".schedules.json")

    def _load_schedules(self) -> None:
        """The kept schedules made again in the scheduler; a file that is not the list written is
        one line naming it, and is left as it is."""
        from infra.local.check_in_clock import restore_schedules

        if self.schedules_file is None or not self.schedules_file.exists():
            return
        from botocore.exceptions import BotoCoreError, ClientError

        text = self.schedules_file.read_text(encoding="utf-8")
        try:
            kept = json.loads(text)
            if not isinstance(kept, list) or not all(isinstance(schedule, dict) for schedule in kept):
                raise ValueError("not a list of schedules")
            restore_schedules(self.operator_client("scheduler"), self._schedule_group, kept)
        except (ValueError, BotoCoreError, ClientError) as error:  # a schedule the scheduler refuses too
            raise LocalToolError(
                f"the check-in schedules file {self.schedules_file} cannot be read ({' '.join(str(error).split())}); "
                "move it aside to start without its schedules"
            ) from None
        self._kept_schedules = text

    def _save_schedules(self) -> None:
        """The check-in schedules written beside the data file, when they changed since the last write."""
        from infra.local.check_in_clock import kept_schedules

        if self.schedules_file is None:
            return
        text = json.dumps(kept_schedules(self.operator_client("scheduler"), self._schedule_group), indent=1)
        if text != self._kept_schedules:
            atomic_write(self.schedules_file, [text])
            self._kept_schedules = text

    @property
    def _schedule_group(self) -> str:
        return str(self.deployment.resolve({"Ref": "CheckInScheduleGroup"}))

    def _load(self) -> None:
        """The data file and its journal into the table (all of it read first: a damaged file is moved
        aside, not half loaded), folded into a new snapshot if there was a journal (or no snapshot
        yet: a journal is only ever beside its snapshot, so one without it is what is left of a
        table the person deleted, and is dropped); then what changes from here on is read from the
        table's stream by `save()`."""
        if self.vectors_file is not None and self.vectors_file.exists():
            self.s3vectors.load(json.loads(self.vectors_file.read_text(encoding="utf-8")))
        self._load_schedules()
        if self.data_file is not None:
            client = self.operator_client()
            keys = [
                key["AttributeName"] for key in client.describe_table(TableName=self.table_name)["Table"]["KeySchema"]
            ]
            if not self.data_file.exists():
                journal_path(self.data_file).unlink(missing_ok=True)
            items = read_table(self.data_file, keys)
            for start in range(0, len(items), 25):
                pending: dict[str, Any] = {
                    self.table_name: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
                }
                while pending:
                    pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
            if journal_path(self.data_file).exists() or not self.data_file.exists():
                write_snapshot(self.data_file, items)
            if (stream_arn := self._stream_arn()) is not None:
                self._streams = streams = self.operator_client("dynamodbstreams")
                shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
                self._changes = streams.get_shard_iterator(
                    StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
                )["ShardIterator"]
        self._loaded = True

    def save(self) -> None:
        """What changed in the table since the last save, appended to the data file's journal (one
        line a change, read from the table's stream): its cost does not grow with the table. A
        table without a stream is written whole. The check-in schedules too, if they changed."""
        if self.data_file is None:
            return
        self._save_schedules()
        if self._changes is None:
            write_snapshot(self.data_file, self.items())
            return
        lines: list[str] = []
        while True:
            answer = self._streams.get_records(ShardIterator=self._changes, Limit=STREAM_PAGE)
            self._changes = answer["NextShardIterator"]
            for record in answer["Records"]:
                change = record["dynamodb"]
                removed = record["eventName"] == "REMOVE"
                lines.append(
                    change_line("delete", change["Keys"]) if removed else change_line("put", change["NewImage"])
                )
            if len(answer["Records"]) < STREAM_PAGE:
                break
        append_changes(self.data_file, lines)

    def compact(self) -> None:
        """The table written whole as the new data file (its journal folded in and removed), and the
        recall index beside it, atomically: when the stack stops."""
        if self.data_file is None or self.vectors_file is None:
            return
        self.save()
        write_snapshot(self.data_file, self.items())
        atomic_write(self.vectors_file, [json.dumps(self.s3vectors.dump())])

    def _save_or_warn(self, save: Callable[[], None]) -> None:
        try:
            save()
        except Exception as error:  # the file keeps its last save; say so instead of a traceback
            print(
                f"warning: could not save the table to {self.data_file} ({error}); it keeps its last save",
                file=sys.stderr,
            )


def admin_client(service: str, region: str, endpoint_url: str, first: bool = False) -> Any:
    """A client of the operator's, who may do anything (the stack's own administration). `first`:
    one short try, so a fresh server that never answers is reported in seconds, not after
    botocore's retries."""
    import boto3
    from botocore.config import Config

    config = (
        Config(read_timeout=FIRST_ANSWER_TIMEOUT_S, connect_timeout=2, retries={"total_max_attempts": 1})
        if first
        else None
    )
    return boto3.client(  # type: ignore[call-overload]
        service,
        region_name=region,
        endpoint_url=endpoint_url,
        aws_access_key_id=LOCAL_AWS_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key="local",  # noqa: S106 - the local server's dummy credentials
        config=config,
    )


def apply_environment(environment: Mapping[str, str | None]) -> dict[str, str | None]:
    """Set (or unset) each variable in this process; returns what they were, for `restore_environment`."""
    saved = {name: os.environ.get(name) for name in environment}
    restore_environment(environment)
    return saved


def restore_environment(saved: Mapping[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextmanager
def temporary_environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Environment variables set (or, for None, unset) for the length of a `with` block, then put back as they were."""
    saved = apply_environment(values)
    try:
        yield
    finally:
        restore_environment(saved)


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
        "  the stack's own keys are the operator's, who may do anything; AWS_ACCESS_KEY_ID=LOCALFN<Function>\n"
        "  acts as that function."
    )

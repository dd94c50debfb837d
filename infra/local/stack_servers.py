"""The local stack's servers: moto's (DynamoDB, SQS, SSM) in a child process, and on loopback threads
the Bedrock emulator, the Twilio stand-in, the local AppConfig and the S3 Vectors stand-in; started
together (the in-process ones while moto's imports), each behind the template's policies when given."""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from infra.local.deployment import LOCAL_ACCOUNT_ID
from infra.local.dynamodb_process import LocalDynamoDB
from infra.local.stack_template import FLAGS_APPLICATION_ID, FLAGS_ENVIRONMENT_ID, FLAGS_PROFILE_ID

if TYPE_CHECKING:
    from infra.local.iam.gate import Gate


class LocalServers:
    def __init__(
        self,
        host: str,
        region: str,
        ports: dict[str, int | None],
        chunk_delay_s: float,
        flags: Callable[[], bytes],
    ) -> None:
        """`ports` by server ("dynamodb", "bedrock", "twilio", "s3vectors"; 0 or None: any free one);
        `flags` gives what the flags profile holds now."""
        # Imported when a stack is made, not with the stack's module (its command checks its ports first).
        from infra.local.appconfig import AppConfigStandIn, Profile
        from infra.local.bedrock_emulator import BedrockEmulator
        from infra.local.s3vectors import S3VectorsStandIn
        from infra.local.twilio_emulator import TwilioEmulator

        self.dynamodb = LocalDynamoDB(host=host, port=ports["dynamodb"])
        self.bedrock = BedrockEmulator(host=host, port=ports["bedrock"] or 0, chunk_delay_s=chunk_delay_s)
        self.twilio = TwilioEmulator(host=host, port=ports["twilio"] or 0)
        profile = Profile(FLAGS_APPLICATION_ID, FLAGS_ENVIRONMENT_ID, FLAGS_PROFILE_ID)
        self.appconfig = AppConfigStandIn(profile, flags, None, host=host)
        self.s3vectors = S3VectorsStandIn(region, LOCAL_ACCOUNT_ID, host=host, port=ports["s3vectors"] or 0)

    def urls(self) -> dict[str, str]:
        return {
            "dynamodb": self.dynamodb.url,
            "bedrock": self.bedrock.url,
            "appconfig": self.appconfig.url,
            "s3vectors": self.s3vectors.url,
            "twilio": self.twilio.url,
        }

    def start(self, gate: "Gate | None", policies: Path | None, with_gateway: bool) -> None:
        """All of them, `gate` enforced by the in-process ones and `policies` by moto's."""
        if gate is not None:
            self.bedrock.gate = gate
            self.appconfig.gate = gate
            self.s3vectors.gate = gate
        self.dynamodb.launch(policies=policies)
        # While moto's server starts (a second or two), the rest: the in-process servers, and the
        # gateway's imports if it will serve.
        self.bedrock.start()
        self.twilio.start()
        self.appconfig.start()
        self.s3vectors.start()
        if with_gateway:
            import infra.local.gateway  # noqa: F401
        self.dynamodb.wait_listening()

    def stop(self) -> None:
        self.s3vectors.stop()
        self.appconfig.stop()
        self.twilio.stop()
        self.bedrock.stop()
        self.dynamodb.stop()

"""Owns what `sam deploy` would make of template.yaml, made locally: the names the local stack gives
the template's resources, the parameter values, which conditions hold, each resource's physical id
and attributes, the value of an intrinsic function (`Ref`, `Fn::GetAtt`, `Fn::Sub`, `Fn::If`,
`Fn::Join`, `Fn::Select`; `Fn::Equals`, `Fn::Not`, `Fn::Or`, `Fn::And` and `Condition` in
conditions) with the local account and region, each function's variables, and the requests that
make the queues and the recall index as the template declares them.

The local stack makes the resources (infra/local/stack.py); this reads the rest from the template,
so a function's environment and its policy come out exactly as CloudFormation would resolve them.
A reference to a resource the local stack does not make is an error that names it, never a guess.
"""

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.local.errors import LocalToolError
from infra.local.template import TEMPLATE_PATH, load_template, resource

LOCAL_ACCOUNT_ID = "123456789012"  # moto's default account: the ARNs of its queues carry it
# Region and dummy credentials for the local servers; no real AWS credentials are involved.
LOCAL_REGION = "us-east-1"
LOCAL_AWS_ENVIRONMENT = {
    "AWS_REGION": LOCAL_REGION,
    "AWS_DEFAULT_REGION": LOCAL_REGION,
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
}
LOCAL_STACK_NAME = "onboarding-memory-local"
_NO_VALUE = object()  # AWS::NoValue: the property is left out
_SUB_REFERENCE = re.compile(r"\$\{([^}]+)\}")


class UnresolvableError(ValueError):
    """The template names something the local deployment does not have."""


@dataclass(frozen=True)
class LocalResource:
    """A resource the local stack made: what `Ref` gives, and its `Fn::GetAtt` attributes."""

    ref: str
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalDeployment:
    region: str
    resources: Mapping[str, LocalResource]
    parameters: Mapping[str, str] = field(default_factory=dict)  # on top of the template's defaults
    account: str = LOCAL_ACCOUNT_ID
    stack_name: str = LOCAL_STACK_NAME
    partition: str = "aws"
    template_path: Path = TEMPLATE_PATH

    @property
    def template(self) -> dict[str, Any]:
        return load_template(self.template_path)

    def parameter(self, name: str) -> str:
        if name in self.parameters:
            return self.parameters[name]
        declared = self.template.get("Parameters", {}).get(name)
        if declared is None:
            raise UnresolvableError(f"template.yaml has no parameter {name}")
        return str(declared.get("Default", ""))

    def _pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": self.partition,
            "AWS::StackName": self.stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }.get(name)

    def _ref(self, name: str) -> str:
        pseudo = self._pseudo(name)
        if pseudo is not None:
            return pseudo
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        if name in self.resources:
            return self.resources[name].ref
        raise UnresolvableError(f"the local stack has no stand-in for {name} (Ref)")

    def _attribute(self, logical_id: str, attribute: str) -> str:
        resource = self.resources.get(logical_id)
        if resource is None or attribute not in resource.attributes:
            raise UnresolvableError(f"the local stack has no stand-in for {logical_id}.{attribute} (Fn::GetAtt)")
        return resource.attributes[attribute]

    def condition(self, name: str) -> bool:
        conditions = self.template.get("Conditions", {})
        if name not in conditions:
            raise UnresolvableError(f"template.yaml has no condition {name}")
        return bool(self._condition(conditions[name]))

    def _condition(self, node: Any) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Fn::Equals":
                left, right = (self.resolve(value) for value in argument)
                return str(left) == str(right)
            if function == "Fn::Not":
                return not self._condition(argument[0])
            if function == "Fn::Or":
                return any(self._condition(value) for value in argument)
            if function == "Fn::And":
                return all(self._condition(value) for value in argument)
            if function == "Condition":
                return self.condition(argument)
        raise UnresolvableError(f"a condition the local deployment cannot evaluate: {node!r}")

    def resolve(self, node: Any) -> Any:
        """`node` with every intrinsic function replaced by its value (AWS::NoValue drops a key or item)."""
        value = self._resolve(node)
        return None if value is _NO_VALUE else value

    def _resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [value for value in (self._resolve(item) for item in node) if value is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Ref":
                return _NO_VALUE if argument == "AWS::NoValue" else self._ref(argument)
            if function == "Fn::GetAtt":
                logical_id, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
                return self._attribute(logical_id, attribute)
            if function == "Fn::Sub":
                return self._sub(argument)
            if function == "Fn::If":
                name, when_true, when_false = argument
                return self._resolve(when_true if self.condition(name) else when_false)
            if function == "Fn::Join":
                separator, values = argument
                return str(separator).join(str(value) for value in self._resolve(values))
            if function == "Fn::Select":
                index, values = argument
                return self._resolve(values)[int(self._resolve(index))]
            if function.startswith("Fn::"):
                raise UnresolvableError(f"the local deployment cannot resolve {function}")
        return {key: value for key, value in ((k, self._resolve(v)) for k, v in node.items()) if value is not _NO_VALUE}

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])
        values = {name: self._resolve(value) for name, value in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match[1]
            if name.startswith("!"):  # ${!Literal} is written as ${Literal}
                return "${" + name[1:] + "}"
            if name in values:
                return str(values[name])
            if "." in name and self._pseudo(name) is None:
                logical_id, attribute = name.split(".", 1)
                return self._attribute(logical_id, attribute)
            return self._ref(name)

        return _SUB_REFERENCE.sub(replace, text)

    def functions(self) -> list[str]:
        """The logical ids of the functions this deployment has (their Condition holds)."""
        return [
            logical_id
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == "AWS::Serverless::Function"
            and ("Condition" not in resource or self.condition(resource["Condition"]))
        ]

    def function_environment(self, logical_id: str) -> dict[str, str]:
        """A function's environment variables as deployed: the template's Globals, then its own."""
        global_variables = self.template.get("Globals", {}).get("Function", {}).get("Environment", {})
        own = self.template["Resources"][logical_id]["Properties"].get("Environment", {})
        variables = {**global_variables.get("Variables", {}), **own.get("Variables", {})}
        return {name: str(value) for name, value in self.resolve(variables).items()}


TABLE_LOGICAL_ID = "ConversationTable"
DEFAULT_TABLE_NAME = "onboarding-memory-local"
RECALL_BUCKET_NAME, RECALL_INDEX_NAME = "onboarding-recall-local", "messages"
IDEMPOTENCY_TABLE_NAME = "onboarding-idempotency-local"
SMS_QUEUE_NAME = "onboarding-sms-local.fifo"
SMS_DEAD_LETTER_QUEUE_NAME = "onboarding-sms-dlq-local.fifo"
CHECK_IN_GROUP_NAME = "onboarding-check-ins-local"
LOCAL_TWILIO_NUMBER = "+15550000000"  # the number the Twilio stand-in's texts are sent to
# The flags profile's ids here (AppConfig makes up its own when the stack deploys).
FLAGS_APPLICATION_ID, FLAGS_ENVIRONMENT_ID, FLAGS_PROFILE_ID = "localflg", "localenv", "memory"
# What the template sets for Lambda Web Adapter itself (the local gateway plays its part), not the app.
ADAPTER_VARIABLES = ("AWS_LAMBDA_EXEC_WRAPPER", "AWS_LWA_", "PORT")


def local_deployment(
    region: str, table_name: str, queue_server_url: str, twilio_account_sid: str, overrides: Mapping[str, str]
) -> LocalDeployment:
    """template.yaml as deployed here: the resources the stack makes, and parameter values."""
    account = LOCAL_ACCOUNT_ID

    def table(name: str) -> LocalResource:
        return LocalResource(name, {"Arn": f"arn:aws:dynamodb:{region}:{account}:table/{name}"})

    def queue(name: str) -> LocalResource:  # moto's queue URLs: the server, the account, the name
        arn = f"arn:aws:sqs:{region}:{account}:{name}"
        return LocalResource(f"{queue_server_url}/{account}/{name}", {"Arn": arn, "QueueName": name})

    bucket_arn = f"arn:aws:s3vectors:{region}:{account}:bucket/{RECALL_BUCKET_NAME}"
    index_arn = f"{bucket_arn}/index/{RECALL_INDEX_NAME}"

    resources = {
        TABLE_LOGICAL_ID: table(table_name),
        "IdempotencyTable": table(IDEMPOTENCY_TABLE_NAME),
        "SmsQueue": queue(SMS_QUEUE_NAME),
        "SmsDeadLetterQueue": queue(SMS_DEAD_LETTER_QUEUE_NAME),
        "FeatureFlagsApplication": LocalResource(FLAGS_APPLICATION_ID),
        "FeatureFlagsEnvironment": LocalResource(FLAGS_ENVIRONMENT_ID),
        "FeatureFlagsProfile": LocalResource(FLAGS_PROFILE_ID),
        "RecallVectorBucket": LocalResource(bucket_arn, {"VectorBucketArn": bucket_arn}),
        "RecallIndex": LocalResource(index_arn, {"IndexArn": index_arn}),
        # The check-ins: the schedule group (moto's scheduler), the role its schedules name, and the
        # function they invoke (the stack's clock invokes it in this process).
        "CheckInScheduleGroup": LocalResource(CHECK_IN_GROUP_NAME),
        "CheckInSchedulerRole": LocalResource(
            "onboarding-check-in-scheduler-local",
            {"Arn": f"arn:aws:iam::{account}:role/onboarding-check-in-scheduler-local"},
        ),
        "CheckInFunction": LocalResource(
            "CheckInFunction", {"Arn": f"arn:aws:lambda:{region}:{account}:function:CheckInFunction"}
        ),
    }
    # A variable already set stands for the parameter the template sets it from (BEDROCK_MODEL_ID
    # for BedrockModelId, ...), so the policies are resolved with the value the functions use.
    parameters = {
        parameter: os.environ[name] for name, parameter in _parameter_variables().items() if name in os.environ
    }
    parameters["TwilioAccountSid"] = twilio_account_sid  # the SMS channel exists: the stand-in's account
    parameters["TwilioPhoneNumber"] = LOCAL_TWILIO_NUMBER  # the check-ins' number: the stand-in's
    parameters.update(overrides)
    first = LocalDeployment(region, resources, parameters)
    name = first.resolve(resource("TwilioWebhookUrlParameter")["Properties"]["Name"])
    return LocalDeployment(region, {**resources, "TwilioWebhookUrlParameter": LocalResource(name)}, parameters)


def function_variables(deployment: LocalDeployment) -> dict[str, str]:
    """Every function's variables as the template sets them (they share one process locally, so the
    template must not give two functions one name with two values)."""
    variables: dict[str, str] = {}
    literal = _literal_variables()
    for logical_id in deployment.functions():
        for name, value in deployment.function_environment(logical_id).items():
            if name.startswith(ADAPTER_VARIABLES):
                continue
            if name in literal and name in os.environ:  # a literal of the template: a value already set wins
                value = os.environ[name]
            if variables.get(name, value) != value:
                raise LocalToolError(f"template.yaml gives {name} two values ({variables[name]!r}, {value!r})")
            variables[name] = value
    return variables


def default_flags(deployment: LocalDeployment) -> bytes:
    """The template's first hosted version of the flags profile."""
    return str(deployment.resolve(resource("FeatureFlagsDefaults")["Properties"]["Content"])).encode()


def queue_request(deployment: LocalDeployment, logical_id: str) -> tuple[str, dict[str, str]]:
    """(name, CreateQueue attributes) of a queue as the template declares it: its visibility
    timeout and redrive policy too, so a failed text comes back when it would on AWS (a test that
    needs it sooner shortens it as an operator would, with SetQueueAttributes)."""
    properties = deployment.resolve(resource(logical_id)["Properties"])
    attributes = {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in {
        "FifoQueue": properties.get("FifoQueue"),
        "MessageRetentionPeriod": properties.get("MessageRetentionPeriod"),
        "VisibilityTimeout": properties.get("VisibilityTimeout"),
        "RedrivePolicy": json.dumps(properties["RedrivePolicy"]) if "RedrivePolicy" in properties else None,
    }.items() if value is not None}  # fmt: skip
    return deployment.resources[logical_id].attributes["QueueName"], attributes


def recall_index_request(deployment: LocalDeployment) -> dict[str, Any]:
    """CreateIndex's arguments for the recall index as the template declares it (the size a value
    already set for EMBEDDING_DIMENSIONS gives, as for every parameter a variable stands for)."""
    properties = deployment.resolve(resource("RecallIndex")["Properties"])
    return {
        "vectorBucketName": RECALL_BUCKET_NAME,
        "indexName": RECALL_INDEX_NAME,
        "dataType": properties["DataType"],
        "dimension": int(properties["Dimension"]),
        "distanceMetric": properties["DistanceMetric"],
        "metadataConfiguration": {
            "nonFilterableMetadataKeys": properties["MetadataConfiguration"]["NonFilterableMetadataKeys"],
            "textSearchConfigurations": [
                {"metadataKey": c["MetadataKey"], "language": c["Language"]}
                for c in properties["MetadataConfiguration"].get("TextSearchConfigurations", [])
            ],
        },
    }


def _declared_variables() -> dict[str, Any]:
    """Every function variable the template declares (Globals and each function), as written."""
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
    parameters = load_template().get("Parameters", {})
    return {
        name: value["Ref"]
        for name, value in _declared_variables().items()
        if isinstance(value, dict) and value.get("Ref") in parameters
    }


def _literal_variables() -> set[str]:
    """The function variables the template sets to a plain value."""
    return {name for name, value in _declared_variables().items() if not isinstance(value, dict)}

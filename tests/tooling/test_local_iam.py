"""The local IAM check's parts, each against what AWS documents: the operation table, the policy
evaluation, the refusals as botocore reads them, and the per-function credentials."""

from typing import Any

import boto3
import pytest
from botocore import xform_name
from botocore.awsrequest import HTTPHeaders
from botocore.parsers import create_parser

from infra.local.iam.actions import Authorization, Place, UnknownOperation, authorizations
from infra.local.iam.gate import Gate, caller, refusal
from infra.local.iam.identity import (
    OPERATOR_ACCESS_KEY,
    access_key_of,
    acting_as,
    function_of,
    new_session,
    running_function,
)
from infra.local.iam.policy import UnsupportedPolicy, decide

PLACE = Place("us-east-1", "123456789012")
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/t"


def needed(service: str, operation: str, params: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    return [(a.action, a.resource, dict(a.context)) for a in authorizations(service, operation, params, PLACE)]


# --- the operation table ----------------------------------------------------------------------


def test_each_item_of_a_transaction_is_authorised_by_its_own_action() -> None:
    items = [{kind: {"TableName": "t"}} for kind in ("Put", "Update", "Delete", "ConditionCheck")]
    found = needed("dynamodb", "TransactWriteItems", {"TransactItems": items})
    enclosing = {"aws:RequestedRegion": "us-east-1", "dynamodb:EnclosingOperation": "TransactWriteItems"}
    assert found == [
        ("dynamodb:PutItem", TABLE, enclosing),
        ("dynamodb:UpdateItem", TABLE, enclosing),
        ("dynamodb:DeleteItem", TABLE, enclosing),
        ("dynamodb:ConditionCheckItem", TABLE, enclosing),
    ]


def test_batch_writes_are_authorised_on_each_table_and_queries_on_their_index() -> None:
    batch = needed("dynamodb", "BatchWriteItem", {"RequestItems": {"t": [], "u": []}})
    assert [(action, resource) for action, resource, _ in batch] == [
        ("dynamodb:BatchWriteItem", TABLE),
        ("dynamodb:BatchWriteItem", TABLE.replace("/t", "/u")),
    ]
    [(action, resource, _)] = needed("dynamodb", "Query", {"TableName": "t", "IndexName": "by-phone"})
    assert (action, resource) == ("dynamodb:Query", TABLE + "/index/by-phone")


def test_queue_and_parameter_operations_name_their_resource_by_arn() -> None:
    url = "http://127.0.0.1:8000/123456789012/q.fifo"
    assert needed("sqs", "SendMessageBatch", {"QueueUrl": url})[0][:2] == (
        "sqs:SendMessage",
        "arn:aws:sqs:us-east-1:123456789012:q.fifo",
    )
    assert needed("ssm", "GetParameter", {"Name": "/a/b"})[0][:2] == (
        "ssm:GetParameter",
        "arn:aws:ssm:us-east-1:123456789012:parameter/a/b",
    )


def test_a_call_through_a_cross_region_profile_needs_the_profile_and_the_model_in_each_region() -> None:
    found = needed("bedrock-runtime", "ConverseStream", {"modelId": "us.anthropic.claude-x-v1:0"})
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x-v1:0"
    assert found[0][:2] == ("bedrock:InvokeModelWithResponseStream", profile)
    assert {resource for _, resource, _ in found[1:]} == {
        f"arn:aws:bedrock:{region}::foundation-model/anthropic.claude-x-v1:0"
        for region in ("us-east-1", "us-east-2", "us-west-2")
    }
    assert all(context["bedrock:InferenceProfileArn"] == profile for _, _, context in found[1:])
    [(action, resource, _)] = needed("bedrock-runtime", "Converse", {"modelId": "anthropic.claude-x-v1:0"})
    assert (action, resource) == (
        "bedrock:InvokeModel",
        "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-x-v1:0",
    )


INDEX = "arn:aws:s3vectors:us-east-1:123456789012:bucket/b/index/i"


def test_a_vector_query_that_filters_or_reads_metadata_also_needs_get_vectors() -> None:
    """S3 Vectors API reference, QueryVectors "Permissions": a filter, metadata or text needs GetVectors."""
    by_name = {"vectorBucketName": "b", "indexName": "i", "topK": 3}
    assert [a for a, *_ in needed("s3vectors", "QueryVectors", by_name)] == ["s3vectors:QueryVectors"]
    for extra in ({"filter": {"user": "u"}}, {"returnMetadata": True}, {"queryTexts": [{"text": "x"}]}):
        found = needed("s3vectors", "QueryVectors", {"indexArn": INDEX, **extra})
        assert [(a, r) for a, r, _ in found] == [("s3vectors:QueryVectors", INDEX), ("s3vectors:GetVectors", INDEX)]
    assert needed("s3vectors", "DeleteVectors", {"indexArn": INDEX, "keys": ["k"]})[0][:2] == (
        "s3vectors:DeleteVectors",
        INDEX,
    )
    # The reference authorises CreateIndex on the index it makes, not on its bucket.
    assert needed("s3vectors", "CreateIndex", {"vectorBucketName": "b", "indexName": "i"})[0][:2] == (
        "s3vectors:CreateIndex",
        INDEX,
    )
    assert needed("s3vectors", "CreateVectorBucket", {"vectorBucketName": "b"})[0][:2] == (
        "s3vectors:CreateVectorBucket",
        "arn:aws:s3vectors:us-east-1:123456789012:bucket/b",
    )


def test_stream_reads_are_authorised_on_the_stream_a_shard_iterator_names() -> None:
    stream = f"{TABLE}/stream/2026-11-26T00:00:00.000"
    assert needed("dynamodbstreams", "GetRecords", {"ShardIterator": f"{stream}|1|abc"})[0][:2] == (
        "dynamodb:GetRecords",
        stream,
    )
    assert needed("dynamodbstreams", "DescribeStream", {"StreamArn": stream})[0][:2] == (
        "dynamodb:DescribeStream",
        stream,
    )


def test_an_operation_no_rule_names_is_authorised_as_the_reference_says() -> None:
    """No action list: any operation of a served service is its own action under the service's IAM
    prefix (when the Service Authorization Reference has it), on the ARN format the reference gives
    its resource type."""
    url = "http://127.0.0.1:8000/123456789012/q.fifo"
    assert needed("sqs", "TagQueue", {"QueueUrl": url, "Tags": {}})[0][:2] == (
        "sqs:TagQueue",
        "arn:aws:sqs:us-east-1:123456789012:q.fifo",
    )
    assert needed("dynamodb", "DescribeContinuousBackups", {"TableName": "t"})[0][:2] == (
        "dynamodb:DescribeContinuousBackups",
        TABLE,
    )
    assert needed("scheduler", "GetSchedule", {"Name": "n"})[0][:2] == (
        "scheduler:GetSchedule",
        "arn:aws:scheduler:us-east-1:123456789012:schedule/default/n",
    )
    assert needed("sqs", "ListQueues", {})[0][:2] == ("sqs:ListQueues", "*")  # no resource type: all


@pytest.mark.parametrize(
    ("service", "operation", "params"),
    [
        ("dynamodbstreams", "GetRecords", {"ShardIterator": "opaque"}),
        ("dynamodb", "DescribeBackup", {"BackupArn": "b"}),  # a resource no rule names from the request
        ("s3vectors", "QueryVectors", {"topK": 1}),
        ("s3vectors", "QueryVectors", {"vectorBucketName": "b", "topK": 1}),  # an index needs its name
        ("dynamodb", "ExecuteStatement", {"Statement": "SELECT * FROM t"}),
        ("dynamodb", "PutItem", {}),
        ("dynamodb", "TransactWriteItems", {"TransactItems": [{"Teleport": {"TableName": "t"}}]}),
        ("unknown", "/", {}),
    ],
)
def test_an_operation_the_table_does_not_know_is_unknown(service: str, operation: str, params: dict[str, Any]) -> None:
    with pytest.raises(UnknownOperation):
        authorizations(service, operation, params, PLACE)


# --- policy evaluation ------------------------------------------------------------------------

ALLOW_PUT = {"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": TABLE}


def allowed(statements: list[dict[str, Any]], action: str, resource: str = TABLE, **context: str) -> bool:
    return decide(statements, Authorization(action, resource, context)).allowed


def test_only_what_a_statement_names_is_allowed() -> None:
    assert allowed([ALLOW_PUT], "dynamodb:PutItem")
    assert allowed([ALLOW_PUT], "DynamoDB:putitem")  # actions are case-insensitive
    assert not allowed([ALLOW_PUT], "dynamodb:ConditionCheckItem")
    assert not allowed([ALLOW_PUT], "dynamodb:PutItem", TABLE + "2")
    assert not allowed([], "dynamodb:PutItem")


def test_wildcards_cover_actions_and_resources_and_an_explicit_deny_wins() -> None:
    statements = [
        {"Effect": "Allow", "Action": "dynamodb:*Item", "Resource": "arn:aws:dynamodb:*:*:table/*"},
        {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": "*"},
    ]
    assert allowed(statements, "dynamodb:GetItem")
    decision = decide(statements, Authorization("dynamodb:DeleteItem", TABLE, {}))
    assert not decision.allowed
    assert decision.explicit_deny
    assert not allowed(statements, "dynamodb:Query")
    assert allowed([{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}], "dynamodb:Query")
    assert not allowed([{"Effect": "Allow", "Action": "*", "NotResource": TABLE}], "dynamodb:Query")


def test_a_condition_must_hold_and_a_missing_key_fails_it() -> None:
    profile = "arn:aws:bedrock:us-east-1:1:inference-profile/us.m"
    through_profile = {
        "Effect": "Allow",
        "Action": "bedrock:InvokeModel",
        "Resource": "arn:aws:bedrock:*::foundation-model/*",
        "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": profile}},
    }
    model = "arn:aws:bedrock:us-west-2::foundation-model/m"
    assert allowed([through_profile], "bedrock:InvokeModel", model, **{"bedrock:InferenceProfileArn": profile})
    assert not allowed([through_profile], "bedrock:InvokeModel", model, **{"bedrock:InferenceProfileArn": "other"})
    assert not allowed([through_profile], "bedrock:InvokeModel", model)  # called directly, not through it
    negated = {**through_profile, "Condition": {"StringNotEquals": {"bedrock:InferenceProfileArn": profile}}}
    assert allowed([negated], "bedrock:InvokeModel", model)  # absent: a negated operator holds
    if_exists = {**through_profile, "Condition": {"StringEqualsIfExists": {"bedrock:InferenceProfileArn": profile}}}
    assert allowed([if_exists], "bedrock:InvokeModel", model)
    like = {**through_profile, "Condition": {"ArnLike": {"bedrock:InferenceProfileArn": "arn:aws:bedrock:*:*:*"}}}
    assert allowed([like], "bedrock:InvokeModel", model, **{"bedrock:InferenceProfileArn": profile})


@pytest.mark.parametrize(
    "condition",
    [
        {"NumericLessThan": {"aws:RequestedRegion": "3"}},
        {"StringEquals": {"dynamodb:LeadingKeys": "USER#a"}},
        {"ForEveryValue:StringEquals": {"aws:RequestedRegion": "us-east-1"}},
    ],
)
def test_what_cannot_be_evaluated_faithfully_fails_closed(condition: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedPolicy):
        allowed([{**ALLOW_PUT, "Condition": condition}], "dynamodb:PutItem")
    with pytest.raises(UnsupportedPolicy):
        allowed([{**ALLOW_PUT, "Resource": "arn:aws:dynamodb:*:*:table/${aws:username}"}], "dynamodb:PutItem")


# --- the gate: who asks, and the refusal botocore reads ---------------------------------------


def header(access_key: str, service: str = "dynamodb") -> str:
    return f"AWS4-HMAC-SHA256 Credential={access_key}/20261126/us-east-1/{service}/aws4_request, Signature=x"


GATE = Gate({"ApiFunction": [ALLOW_PUT]}, "123456789012", "stack", unreadable={"Broken": "a policy template"})


def test_the_caller_is_the_signature_s_access_key_and_region() -> None:
    assert caller(header("LOCALFNApiFunction")) == ("LOCALFNApiFunction", "us-east-1")
    assert caller(None) is None


def test_a_function_may_do_what_its_policy_allows_and_the_operator_anything() -> None:
    put = {"TableName": "t", "Item": {}}
    assert GATE.check("dynamodb", "PutItem", put, header(access_key_of("ApiFunction"))) is None
    assert GATE.check("dynamodb", "DeleteTable", {"TableName": "t"}, header(OPERATOR_ACCESS_KEY)) is None
    refused = GATE.check("dynamodb", "DeleteItem", {"TableName": "t"}, header(access_key_of("ApiFunction")))
    assert refused is not None
    assert refused.code == "AccessDeniedException"
    assert refused.message == (
        "User: arn:aws:sts::123456789012:assumed-role/stack-ApiFunctionRole/ApiFunction is not authorized to "
        f"perform: dynamodb:DeleteItem on resource: {TABLE} because no identity-based policy allows the "
        "dynamodb:DeleteItem action"
    )


@pytest.mark.parametrize(
    ("access_key", "operation", "code", "says"),
    [
        ("AKIAELSEWHERE", "PutItem", "UnrecognizedClientException", "security token"),
        (access_key_of("Nobody"), "PutItem", "UnrecognizedClientException", "security token"),
        (access_key_of("Broken"), "PutItem", "AccessDeniedException", "cannot read its policy: a policy template"),
        (access_key_of("ApiFunction"), "ExecuteStatement", "AccessDeniedException", "does not know dynamodb"),
    ],
)
def test_unknown_callers_operations_and_policies_are_refused_and_named(
    access_key: str, operation: str, code: str, says: str
) -> None:
    refused = GATE.check("dynamodb", operation, {"TableName": "t"}, header(access_key))
    assert refused is not None
    assert refused.code == code
    assert says in refused.message
    unsigned = GATE.check("dynamodb", "PutItem", {"TableName": "t"}, None)
    assert unsigned is not None
    assert unsigned.code == "MissingAuthenticationTokenException"


@pytest.mark.parametrize(
    ("service", "operation", "params", "code", "status"),
    [
        ("dynamodb", "put_item", {"TableName": "t", "Item": {}}, "AccessDeniedException", 400),
        ("sqs", "send_message", {"QueueUrl": "http://q/1/q", "MessageBody": "x"}, "AccessDenied", 403),
        ("ssm", "get_parameter", {"Name": "/p"}, "AccessDeniedException", 400),
        ("bedrock-runtime", "converse", {"modelId": "m", "messages": []}, "AccessDeniedException", 403),
        ("appconfigdata", "get_latest_configuration", {"ConfigurationToken": "t"}, "AccessDeniedException", 403),
        ("s3vectors", "query_vectors", {"topK": 1}, "AccessDeniedException", 403),
        ("dynamodbstreams", "get_records", {"ShardIterator": "s"}, "AccessDeniedException", 400),
    ],
)
def test_botocore_reads_each_refusal_as_the_error_aws_answers(
    service: str, operation: str, params: dict[str, Any], code: str, status: int
) -> None:
    """The refusal goes through botocore's own response parser, as an answer on the wire would."""
    refused = refusal(service, "AccessDeniedException", "User: x is not authorized")
    service_model = boto3.session.Session().client(service, region_name="us-east-1").meta.service_model  # type: ignore[call-overload]
    model = service_model.operation_model(_operation_name(service_model, operation))
    parsed = create_parser(service_model.protocol).parse(
        {"status_code": refused.status, "headers": HTTPHeaders.from_dict(dict(refused.headers)), "body": refused.body},
        model.output_shape,
    )
    assert parsed["Error"]["Code"] == code
    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == status
    assert "not authorized" in parsed["Error"]["Message"]
    del params


def _operation_name(service_model: Any, method: str) -> str:
    return str(next(name for name in service_model.operation_names if xform_name(name) == method))


# --- credentials per function ---------------------------------------------------------------


def test_requests_are_signed_as_the_function_running_and_otherwise_as_the_operator() -> None:
    session = new_session("us-east-1")
    credentials = session.get_credentials()
    assert credentials is not None
    assert credentials.get_frozen_credentials().access_key == OPERATOR_ACCESS_KEY
    with acting_as("SmsWorkerFunction"):
        assert running_function() == "SmsWorkerFunction"
        assert credentials.get_frozen_credentials().access_key == access_key_of("SmsWorkerFunction")
        with acting_as(None):
            assert credentials.get_frozen_credentials().access_key == OPERATOR_ACCESS_KEY
    assert credentials.get_frozen_credentials().access_key == OPERATOR_ACCESS_KEY
    assert function_of(access_key_of("ApiFunction")) == "ApiFunction"
    assert function_of(OPERATOR_ACCESS_KEY) is None

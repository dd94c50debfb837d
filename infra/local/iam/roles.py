"""Owns each function's policy, read from template.yaml the way SAM deploys it.

SAM gives every function an execution role: the `Statement`s of its `Policies` as an inline policy,
plus the AWS managed policies SAM attaches by itself: AWSLambdaBasicExecutionRole always,
AWSXrayWriteOnlyAccess when `Tracing: Active`, AWSLambdaSQSQueueExecutionRole for an SQS event and
AWSLambdaDynamoDBExecutionRole for a DynamoDB stream event (the roles Lambda's pollers use).
tests/infrastructure/test_deployed_configuration.py checks this reading against the SAM
translator's own output, so the two cannot drift apart.

A `Policies` entry this does not read (a SAM policy template, a managed policy by name) raises
UnsupportedPolicy: the function's requests are then refused, not allowed by a guess.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from infra.local.deployment import LocalDeployment
from infra.local.iam.policy import Statement, UnsupportedPolicy

_LOGS = ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"]
_XRAY = [
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:GetSamplingStatisticSummaries",
]
# The statements of the AWS managed policies SAM attaches (AWS Managed Policy Reference).
MANAGED_POLICIES: Mapping[str, Sequence[Statement]] = {
    "AWSLambdaBasicExecutionRole": [{"Effect": "Allow", "Action": _LOGS, "Resource": "*"}],
    "AWSXrayWriteOnlyAccess": [{"Effect": "Allow", "Action": _XRAY, "Resource": "*"}],
    "AWSLambdaSQSQueueExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", *_LOGS],
            "Resource": "*",
        }
    ],
    "AWSLambdaDynamoDBExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:DescribeStream",
                "dynamodb:GetRecords",
                "dynamodb:GetShardIterator",
                "dynamodb:ListStreams",
                *_LOGS,
            ],
            "Resource": "*",
        }
    ],
}


def managed_policy_arn(name: str, partition: str = "aws") -> str:
    service_roles = ("AWSLambdaBasicExecutionRole", "AWSLambdaSQSQueueExecutionRole", "AWSLambdaDynamoDBExecutionRole")
    prefix = "service-role/" if name in service_roles else ""
    return f"arn:{partition}:iam::aws:policy/{prefix}{name}"


def attached_managed_policies(deployment: LocalDeployment, logical_id: str) -> list[str]:
    """The names of the managed policies SAM attaches to the function's role."""
    properties = deployment.template["Resources"][logical_id]["Properties"]
    globals_ = deployment.template.get("Globals", {}).get("Function", {})
    names = ["AWSLambdaBasicExecutionRole"]
    if properties.get("Tracing", globals_.get("Tracing")) == "Active":
        names.append("AWSXrayWriteOnlyAccess")
    events = [event.get("Type") for event in properties.get("Events", {}).values()]
    if "SQS" in events:
        names.append("AWSLambdaSQSQueueExecutionRole")
    if "DynamoDB" in events:
        names.append("AWSLambdaDynamoDBExecutionRole")
    return names


def inline_statements(deployment: LocalDeployment, logical_id: str) -> list[Statement]:
    """The function's own `Policies` statements, with intrinsic functions resolved."""
    policies: Any = deployment.template["Resources"][logical_id]["Properties"].get("Policies", [])
    statements: list[Statement] = []
    for policy in policies if isinstance(policies, list) else [policies]:
        if not (isinstance(policy, dict) and set(policy) <= {"Statement", "Version"}):
            raise UnsupportedPolicy(f"{logical_id}'s policy {policy!r} (only inline Statement lists are read)")
        listed = deployment.resolve(policy["Statement"])
        statements.extend(listed if isinstance(listed, list) else [listed])
    return statements


def function_statements(deployment: LocalDeployment, logical_id: str) -> list[Statement]:
    """Everything the function's execution role allows, as one list of statements."""
    managed = [s for name in attached_managed_policies(deployment, logical_id) for s in MANAGED_POLICIES[name]]
    return [*inline_statements(deployment, logical_id), *managed]

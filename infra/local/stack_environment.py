"""What a process needs to use the local stack: every function's variables as the template sets
them, then the local endpoints through AWS's standard variables (application code has no local
branch), applied to this process or handed to a child."""

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from infra.local.deployment import LocalDeployment
from infra.local.flags import FLAGS_FILE_VARIABLE
from infra.local.stack_resources import LOCAL_AWS_ENVIRONMENT
from infra.local.stack_template import function_variables

# moto copies its whole table for every transaction, so on a big local table (the benchmark's, a
# long-lived data file) an answer can take seconds that DynamoDB answers in milliseconds: locally the
# table client waits longer, and the turn's deadline keeps room for it. A value already set wins.
LOCAL_TIMEOUTS = {"DYNAMODB_READ_TIMEOUT_S": "10", "TURN_STORE_RESERVE_S": "35", "TURN_DEADLINE_S": "90"}


def stack_environment(deployment: LocalDeployment, real_model: bool, urls: Mapping[str, str]) -> dict[str, str | None]:
    """The variables (None: unset) for servers at `urls` ("dynamodb", "bedrock", "appconfig",
    "s3vectors", "twilio"); no real AWS credentials are involved. With `real_model`, the model is
    left to the environment (its own credentials and region)."""
    region = deployment.region
    model: dict[str, str | None] = (
        {"AWS_REGION": region, "AWS_DEFAULT_REGION": region}
        if real_model
        else {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": urls["bedrock"], **LOCAL_AWS_ENVIRONMENT}
    )
    return {
        **function_variables(deployment),
        "AWS_ENDPOINT_URL_DYNAMODB": urls["dynamodb"],
        **model,
        "AWS_ENDPOINT_URL_SQS": urls["dynamodb"],
        "AWS_ENDPOINT_URL_SSM": urls["dynamodb"],
        "AWS_ENDPOINT_URL_APPCONFIGDATA": urls["appconfig"],
        "AWS_ENDPOINT_URL_S3VECTORS": urls["s3vectors"],
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": urls["dynamodb"],
        "TWILIO_API_BASE_URL": urls["twilio"],
        # As deployed: the webhook reads its URL from its parameter, the flags come from AppConfig.
        "TWILIO_WEBHOOK_URL": None,
        FLAGS_FILE_VARIABLE: None,
        **{name: os.environ.get(name, value) for name, value in LOCAL_TIMEOUTS.items()},
    }


def child_environment(environment: Mapping[str, str | None], logical_id: str | None) -> dict[str, str]:
    """This process's environment with the stack's applied (unset names removed); with `logical_id`,
    signing as that function, as Lambda gives each function its role's credentials
    (infra/local/iam/identity.py)."""
    from infra.local.iam.identity import access_key_of

    child = dict(os.environ)
    for name, value in environment.items():
        if value is None:
            child.pop(name, None)
        else:
            child[name] = value
    if logical_id is not None:
        child["AWS_ACCESS_KEY_ID"] = access_key_of(logical_id)
    return child


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

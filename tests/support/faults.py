"""Failing one botocore call on purpose: the store's client answers as DynamoDB does when it is down."""

from typing import Any

from botocore.exceptions import ClientError


def fail_nth_call(client: Any, operation: str, n: int) -> None:
    """Make the `n`th call (1-based) of `client.<operation>` raise an InternalServerError; others pass."""
    real = getattr(client, operation)
    calls: list[int] = []

    def maybe_fail(**request: Any) -> Any:
        calls.append(1)
        if len(calls) == n:
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, operation)
        return real(**request)

    setattr(client, operation, maybe_fail)

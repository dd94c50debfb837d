"""Owns the SMS functions' Powertools Idempotency store: Powertools' own DynamoDB layer, whose
in-progress record also names the one call that wrote it, so that botocore's retry of that call is
recognised as the same write and not as another delivery in progress.

Why: a PutItem of the in-progress record can be applied while its answer is lost on the way back.
botocore sends it again; the retry meets the record its first try wrote, the condition fails, and
Powertools raises `IdempotencyAlreadyInProgressError`: the webhook took its own text for a
duplicate and acknowledged it unqueued, and the worker locked itself out of a text until the
in-progress record ran out. With the call id below, the retry's condition holds (the record is ours),
the write succeeds, and the work goes on. A different delivery, even in the same invocation, makes
a new call with a new call id, and meets the in-progress record as before.

botocore builds a call's parameters once and sends the same request on each of its retries, so a
call id made when the parameters are built is the same on every try of one call and new for the next.
"""

import uuid
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CALL_ATTRIBUTE = "call_id"
_BUILD_PUT = "before-parameter-build.dynamodb.PutItem"


class CallMarkingIdempotencyLayer(DynamoDBPersistenceLayer):
    """Powertools' DynamoDB persistence layer; its in-progress PutItem carries an id of its own
    call, and its condition also holds for a record with that id (the call's own earlier try)."""

    def __init__(self, table_name: str, boto3_client: "DynamoDBClient") -> None:
        super().__init__(table_name=table_name, boto3_client=boto3_client)
        # Unique per layer: the client is the function's only DynamoDB client, shared with the store.
        boto3_client.meta.events.register(_BUILD_PUT, self._mark_call, unique_id=f"idempotency-call-{id(self)}")

    def _mark_call(self, params: dict[str, Any], **_: Any) -> None:
        item = params.get("Item", {})
        in_progress = item.get(self.status_attr, {}).get("S") == STATUS_CONSTANTS["INPROGRESS"]
        if params.get("TableName") != self.table_name or not in_progress or "ConditionExpression" not in params:
            return
        call_id = uuid.uuid4().hex
        item[CALL_ATTRIBUTE] = {"S": call_id}
        params["ConditionExpression"] = (
            f"({params['ConditionExpression']}) OR (#status = :inprogress AND #call = :call)"
        )
        params.setdefault("ExpressionAttributeNames", {})["#call"] = CALL_ATTRIBUTE
        params.setdefault("ExpressionAttributeValues", {})[":call"] = {"S": call_id}

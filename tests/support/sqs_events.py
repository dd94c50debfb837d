"""SQS event source mapping events, shaped as Lambda delivers them from a FIFO queue."""

import hashlib
import uuid
from typing import Any

from onboarding.account import AccountService
from onboarding.config import DEFAULT_LIMITS
from onboarding.linking import PhoneLinking
from onboarding.persistence import Repositories
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sealing import KeyLookup


def sqs_record(request: SmsTurnRequest | str, group: str | None = None, receive_count: int = 1) -> dict[str, Any]:
    body = request if isinstance(request, str) else request.model_dump_json()
    group_id = group or (request.user_id if isinstance(request, SmsTurnRequest) else "unknown")
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": f"handle-{uuid.uuid4().hex}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": "1763800000000",
            "SequenceNumber": "18889999999999999999",
            "MessageGroupId": group_id,
            "SenderId": "AIDAEXAMPLE",
            "MessageDeduplicationId": request if isinstance(request, str) else request.message_id,
            "ApproximateFirstReceiveTimestamp": "1763800000001",
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:sms-turns.fifo",
        "awsRegion": "us-east-1",
    }


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def text_keys(store: Repositories) -> KeyLookup:
    """How the worker finds the key that sealed a queued text: through the phone's service."""
    return PhoneLinking(store, DEFAULT_LIMITS, AccountService(store, DEFAULT_LIMITS)).queued_text_key

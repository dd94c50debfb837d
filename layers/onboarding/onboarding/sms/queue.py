"""Owns the queue of texts to answer: SQS FIFO, one message group per user so a user's texts are
answered in order, each text sealed with its user's key (`sealing`)."""

import hashlib
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from onboarding.model.users import TextKey
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sealing import seal

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class QueueError(Exception):
    """The turn could not be queued (after botocore's own retries)."""


class TurnQueue:
    def __init__(self, client: "SQSClient", queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send(self, request: SmsTurnRequest, key: TextKey) -> None:
        """Queue `request`, sealed with `key`, its user's."""
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=seal(request, key),
                MessageGroupId=request.user_id,
                # SQS drops a second send of the same text within 5 minutes (Twilio's retries). A
                # hash: the MessageSid names the text at Twilio, and the message outlives an erase.
                MessageDeduplicationId=hashlib.sha256(request.message_id.encode()).hexdigest(),
            )
        except (ClientError, BotoCoreError) as error:
            raise QueueError("could not queue the text for an answer") from error

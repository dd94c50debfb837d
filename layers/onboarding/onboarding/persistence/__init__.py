"""Owns the DynamoDB table: the only package that speaks DynamoDB, and only the services (the turn,
the account, linking, the recall indexer) and the composition root import it.

`schema` (the key schema), `codec` (items to domain types and back), `calls` (one place that
translates every botocore failure, service or network, into `StoreError`, reads a cancelled
transaction's reasons by the name of the item they belong to, and writes whole partitions in
batches), `capacity` (what each request consumed, for the turn's ledger), and one repository per
aggregate: `conversations` (a user's conversation: the turn's one Query, history pages, the fold's read),
`writes` (a turn's writes), `client_records` (which message a client message id stored, and the
lease of the delivery answering it), `phones`
(a number's owner, opt-out, link codes), `link_requests` (a phone's code waiting for its YES, and
its counted link attempts), `rate_limit`, `erasure` (an erase, and its
guard on every write), `text_keys` (the keys that seal queued texts), `merger` (a link's merge), `changes`
(the table's stream). `Repositories` bundles them over one client.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onboarding.config import Limits
from onboarding.persistence.capacity import count_capacity, to_the_running_turn
from onboarding.persistence.client_records import ClientRecords
from onboarding.persistence.conversations import Conversations
from onboarding.persistence.erasure import Eraser
from onboarding.persistence.link_requests import LinkRequests
from onboarding.persistence.merger import Merger
from onboarding.persistence.phones import PhoneDirectory
from onboarding.persistence.rate_limit import RateLimiter
from onboarding.persistence.text_keys import TextKeys
from onboarding.persistence.writes import TurnWriter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "ClientRecords",
    "Conversations",
    "Eraser",
    "LinkRequests",
    "Merger",
    "PhoneDirectory",
    "RateLimiter",
    "Repositories",
    "TextKeys",
    "TurnWriter",
]


@dataclass(frozen=True)
class Repositories:
    """Every repository of one table, over one client."""

    conversations: Conversations
    writes: TurnWriter
    client_records: ClientRecords
    phones: PhoneDirectory
    rate_limits: RateLimiter
    erasure: Eraser
    merger: Merger
    link_requests: LinkRequests
    text_keys: TextKeys

    @classmethod
    def over(
        cls, client: "DynamoDBClient", table_name: str, limits: Limits, clock: Callable[[], float] = time.time
    ) -> "Repositories":
        count_capacity(client.meta.events, to_the_running_turn, "turn-capacity")
        rate_limits = RateLimiter(client, table_name, clock)
        records = ClientRecords(client, table_name, limits, clock)
        return cls(
            conversations=Conversations(client, table_name, clock),
            writes=TurnWriter(client, table_name, limits, rate_limits, records, clock),
            client_records=records,
            phones=PhoneDirectory(client, table_name, limits, rate_limits, clock),
            rate_limits=rate_limits,
            erasure=Eraser(client, table_name, limits, clock),
            merger=Merger(client, table_name, limits, clock),
            link_requests=LinkRequests(client, table_name, clock),
            text_keys=TextKeys(client, table_name),
        )

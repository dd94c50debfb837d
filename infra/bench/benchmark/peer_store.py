"""LangChain's `DynamoDBChatMessageHistory`, the store ours is measured against (store_growth.py and
the cost ledger): one item per session, read and written back whole every turn, until DynamoDB
refuses the item as over 400 KB; the most messages one item holds is found by bisection."""

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

PEER_TABLE = "langchain-history-growth"
QUESTION = "What should I eat before an early morning run?"
ANSWER = "A banana or a slice of toast with honey about 30 minutes before works well for most people."


class PeerHistory:
    """LangChain's store for one session, with its history written straight in (seeding it turn
    by turn would rewrite the whole item every turn: quadratic, and the point of this comparison)."""

    def __init__(self, session_id: str) -> None:
        # Imported here: the benchmark's other sections do not need langchain-community.
        from langchain_community.chat_message_histories import DynamoDBChatMessageHistory

        self.history = DynamoDBChatMessageHistory(table_name=PEER_TABLE, session_id=session_id)

    def seed(self, count: int) -> None:
        from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

        messages = [
            (HumanMessage if i % 2 == 0 else AIMessage)(
                content=f"history message number {i}, about as long as a short chat line"
            )
            for i in range(count)
        ]
        self.history.table.put_item(Item={"SessionId": self.history.session_id, "History": messages_to_dict(messages)})

    def turn(self) -> None:
        from langchain_core.messages import AIMessage, HumanMessage

        _ = self.history.messages  # what the chain reads to build the prompt
        self.history.add_messages([HumanMessage(content=QUESTION), AIMessage(content=ANSWER)])


def create_peer_table(client: Any) -> None:
    """The table LangChain's store expects: one item per session, keyed by `SessionId`."""
    client.create_table(
        TableName=PEER_TABLE,
        KeySchema=[{"AttributeName": "SessionId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "SessionId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def too_large(error: ClientError) -> bool:
    return "size" in str(error.response.get("Error", {}).get("Message", "")).lower()


def run_unless_too_large(
    peer: PeerHistory | None, action: Callable[[PeerHistory], None]
) -> tuple[PeerHistory | None, str | None]:
    """`action` on the peer's store, unless its item has already failed (None); once DynamoDB
    refuses the item as too large, (None, why): the peer's turns fail from then on."""
    if peer is None:
        return None, None
    try:
        action(peer)
    except ClientError as error:
        if not too_large(error):
            raise
        return None, f"fails: {error.response.get('Error', {}).get('Message', '')}"
    return peer, None


def find_peer_limit(upper: int) -> int:
    """The most seeded messages one peer item holds: a bisection over put_item."""
    low, high = 0, upper
    while high - low > 1:
        middle = (low + high) // 2
        try:
            PeerHistory(f"limit-{middle}-{time.time_ns()}").seed(middle)
            low = middle
        except ClientError as error:
            if not too_large(error):
                raise
            high = middle
    return low

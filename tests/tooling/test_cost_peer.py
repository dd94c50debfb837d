"""LangChain's store in the cost ledger: its turns are metered like ours, and once its one item
outgrows DynamoDB's 400 KB its turns fail, which the ledger shows instead of a price."""

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from infra.bench.cost.__main__ import PeerSession, create_peer_table
from infra.bench.cost.ledger import peer_memory_cost, summarize_peer
from infra.bench.cost.meter import Meter


@pytest.fixture
def meter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Meter]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        saved = boto3.DEFAULT_SESSION
        boto3.setup_default_session(region_name="us-east-1")
        try:
            reader = boto3.Session(region_name="us-east-1").client("dynamodb")
            create_peer_table(reader)
            metered = Meter(reader, {}, 12.0)
            assert boto3.DEFAULT_SESSION is not None
            metered.install(boto3.DEFAULT_SESSION)
            yield metered
        finally:
            boto3.DEFAULT_SESSION = saved


def test_a_peer_turn_reads_its_item_twice_and_sets_its_whole_history_again(meter: Meter) -> None:
    session = PeerSession(meter, 200)
    turn = session.turn()
    assert turn is not None
    assert [request.operation for request in turn.requests] == ["GetItem", "GetItem", "UpdateItem"]
    figures = summarize_peer(200, [turn], session.failure)
    assert figures.write_units is not None
    assert figures.write_units > 10  # 200 messages of JSON: well over 10 KB, rewritten each turn


def test_once_its_item_outgrows_400_kb_its_turns_fail_and_have_no_price(meter: Meter) -> None:
    session = PeerSession(meter, 5_000)
    assert session.failure is not None
    assert "size" in session.failure.lower()
    assert session.turn() is None
    figures = summarize_peer(5_000, [], session.failure)
    assert figures.failure == session.failure
    assert peer_memory_cost(figures) is None

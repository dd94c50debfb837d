"""The cost ledger's DynamoDB arithmetic against DynamoDB's documented rules: each expected figure
is an example from the Developer Guide or the pricing pages (named beside it), or follows from
their rules in one step."""

import base64

import pytest

from infra.bench.cost.meter import (
    item_size,
    number_size,
    read_units,
    request_read_units,
    request_write_units,
    value_size,
    write_units,
)

KB = 1024


def _string_item(total_bytes: int, name: str = "pk") -> dict[str, dict[str, str]]:
    """An item of exactly `total_bytes`: one string attribute, its name included."""
    return {name: {"S": "x" * (total_bytes - len(name))}}


# Item sizes ("DynamoDB item sizes and formats")


def test_a_string_counts_its_name_and_its_utf8_bytes() -> None:
    assert item_size({"name": {"S": "Sam"}}) == 4 + 3
    assert item_size({"città": {"S": "Zürich ✓"}}) == len("città".encode()) + len("Zürich ✓".encode())


@pytest.mark.parametrize(
    ("number", "size"),
    [
        ("7", 2),  # one significant digit: 1 byte, plus 1
        ("123", 3),  # three digits: 2 bytes, plus 1
        ("1000", 2),  # trailing zeros trimmed
        ("0.00123", 3),  # leading zeros trimmed
        ("-12.5", 3),
        ("1E+5", 2),
        ("12345678901234567890123456789012345678", 20),  # 38 digits, the most there are
    ],
)
def test_a_number_is_a_byte_per_two_significant_digits_plus_one(number: str, size: int) -> None:
    assert number_size(number) == size
    assert item_size({"n": {"N": number}}) == 1 + size


def test_a_binary_counts_its_raw_bytes_not_its_base64() -> None:
    raw = bytes(range(30))
    assert value_size({"B": raw}) == 30
    assert value_size({"B": base64.b64encode(raw).decode()}) == 30  # as it is on the wire


def test_booleans_and_nulls_are_one_byte() -> None:
    assert item_size({"ok": {"BOOL": True}, "gone": {"NULL": True}}) == 2 + 1 + 4 + 1


def test_lists_and_maps_cost_three_bytes_and_one_per_element() -> None:
    assert value_size({"L": []}) == 3
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (2 + 1) + (2 + 1)
    assert value_size({"M": {"k": {"S": "v"}}}) == 3 + (1 + 1 + 1)
    assert value_size({"M": {"outer": {"L": [{"BOOL": False}]}}}) == 3 + (5 + (3 + 1 + 1) + 1)


def test_sets_sum_their_elements() -> None:
    assert value_size({"SS": ["a", "bcd"]}) == 4
    assert value_size({"NS": ["1", "22"]}) == 2 + 2


def test_a_malformed_value_is_refused() -> None:
    with pytest.raises(ValueError, match="exactly one type"):
        value_size({"S": "a", "N": "1"})
    with pytest.raises(ValueError, match="unknown attribute type"):
        value_size({"X": "a"})
    with pytest.raises(ValueError, match="not a DynamoDB number"):
        number_size("twelve")


# Reads ("DynamoDB read and write operations"; the on-demand pricing page)


def test_reads_round_up_to_4_kb() -> None:
    assert read_units(3_500, consistent=True) == 1  # "reading a 3,500-byte item consumes ... a 4 KB item"
    assert read_units(8 * KB, consistent=True) == 2  # "a strongly consistent read request of an 8 KB item"
    assert read_units(8 * KB, consistent=False) == 1  # "... an eventually consistent read of an 8 KB item"
    assert read_units(10 * KB, consistent=True) == 3  # "a 10 KB item ... rounds the item size to 12 KB"
    assert read_units(4 * KB + 1, consistent=False) == 1.0


def test_reading_nothing_still_costs_the_minimum() -> None:
    assert request_read_units("GetItem", {"ConsistentRead": True}, {}) == 1
    assert request_read_units("GetItem", {}, {}) == 0.5  # eventually consistent by default
    assert request_read_units("Query", {}, {"Items": []}) == 0.5


def test_a_query_rounds_the_sum_of_its_items_but_a_batch_get_rounds_each() -> None:
    items = [_string_item(1536), _string_item(6656)]  # 1.5 KB and 6.5 KB
    # Query: the items read are summed first, 8 KB; BatchGetItem: 4 KB + 8 KB = 12 KB (the guide's example).
    assert request_read_units("Query", {"ConsistentRead": True}, {"Items": items}) == 2
    batch_request = {"RequestItems": {"t": {"ConsistentRead": True}}}
    assert request_read_units("BatchGetItem", batch_request, {"Responses": {"t": items}}) == 3


def test_get_item_rounds_its_item() -> None:
    response = {"Item": _string_item(4 * KB + 10)}
    assert request_read_units("GetItem", {"ConsistentRead": True}, response) == 2
    assert request_read_units("GetItem", {"ConsistentRead": False}, response) == 1


# Writes


def test_writes_round_up_to_1_kb_and_transactions_count_twice() -> None:
    assert write_units(3 * KB) == 3  # "a standard write request of a 3 KB item would require three WCUs"
    assert write_units(3 * KB, transactional=True) == 6  # "a transactional write ... of a 3 KB item ... six"
    assert write_units(1) == 1
    assert write_units(0) == 1  # an absent item: the minimum
    assert write_units(KB + 1) == 2


def test_three_500_byte_items_in_a_transaction_take_six_units() -> None:
    # "Amazon DynamoDB Transactions: how it works", capacity management: three 500-byte items, 6 WCUs.
    request = {"TransactItems": [{"Put": {"TableName": "t", "Item": _string_item(500, f"k{i}")}} for i in range(3)]}
    assert request_write_units("TransactWriteItems", request, [(None, 500)] * 3) == 6


def test_a_put_that_replaces_counts_the_larger_of_the_two_items() -> None:
    request = {"TableName": "t", "Item": _string_item(500)}
    assert request_write_units("PutItem", request, [(2_500, 500)]) == 3  # the 2.5 KB item it replaced
    assert request_write_units("PutItem", request, [(None, 500)]) == 1


def test_an_update_counts_the_larger_of_the_item_before_and_after() -> None:
    request = {"TableName": "t", "Key": {"pk": {"S": "a"}}}
    assert request_write_units("UpdateItem", request, [(1_000, 5_000)]) == 5  # it grew
    assert request_write_units("UpdateItem", request, [(5_000, 1_000)]) == 5  # it shrank
    assert request_write_units("UpdateItem", request, [(None, 10)]) == 1  # it was created small


def test_a_delete_and_a_condition_check_count_the_item_as_it_was() -> None:
    key = {"TableName": "t", "Key": {"pk": {"S": "a"}}}
    assert request_write_units("DeleteItem", key, [(3_000, None)]) == 3
    assert request_write_units("DeleteItem", key, [(None, None)]) == 1
    transaction = {"TransactItems": [{"ConditionCheck": key}, {"Delete": key}]}
    assert request_write_units("TransactWriteItems", transaction, [(None, None), (2_100, None)]) == 2 + 6


def test_a_turn_commit_transaction() -> None:
    """A turn's commit as the store sends it: two new messages, the state replacing a smaller one,
    the rate counter updated, the erasure guard checked on an absent item."""
    request = {
        "TransactItems": [
            {"Put": {"TableName": "t", "Item": _string_item(700)}},
            {"Put": {"TableName": "t", "Item": _string_item(1_300)}},
            {"Put": {"TableName": "t", "Item": _string_item(2_200)}},
            {"Update": {"TableName": "t", "Key": {"pk": {"S": "r"}}}},
            {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "e"}}}},
        ]
    }
    sizes = [(None, 700), (None, 1_300), (1_900, 2_200), (90, 95), (None, None)]
    assert request_write_units("TransactWriteItems", request, sizes) == 2 * (1 + 2 + 3 + 1 + 1)


def test_a_batch_write_counts_each_item() -> None:
    request = {
        "RequestItems": {
            "t": [
                {"PutRequest": {"Item": _string_item(1_500)}},
                {"DeleteRequest": {"Key": {"pk": {"S": "a"}}}},
            ]
        }
    }
    assert request_write_units("BatchWriteItem", request, [(None, 1_500), (4_000, None)]) == 2 + 4


def test_a_refused_write_costs_the_stored_item() -> None:
    request = {"TableName": "t", "Item": _string_item(5_000)}
    assert request_write_units("PutItem", request, [(2_048, 2_048)], condition_failed=True) == 2
    assert request_write_units("PutItem", request, [(None, None)], condition_failed=True) == 1


def test_sizes_must_match_the_items_written() -> None:
    request = {"TransactItems": [{"Put": {"TableName": "t", "Item": _string_item(10, f"k{i}")}} for i in range(2)]}
    with pytest.raises(ValueError, match="2 items written but 1 sizes"):
        request_write_units("TransactWriteItems", request, [(None, 10)])

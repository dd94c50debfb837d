"""The local data file is saved by appending what changed (read from the table's stream), not by
writing the whole table after every turn: a save's cost does not grow with the table. It is
counted in bytes written (the kernel's count for this process), not in time."""

from pathlib import Path
from typing import Any

import pytest

from infra.local.data import journal_path, read_table, write_snapshot
from infra.local.stack import LocalStack

pytestmark = pytest.mark.integration


def _bytes_written() -> int:
    for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("no wchar in /proc/self/io")


def _other_user(n: int) -> dict[str, Any]:
    """An item of another user (a profile, which the recall indexer's filter lets pass by)."""
    return {"pk": {"S": f"USER#other-{n}"}, "sk": {"S": "~PROFILE"}, "name": {"S": f"someone {n} " + "x" * 150}}


def _turn(stack: LocalStack, n: int) -> None:
    """What a turn writes, in one transaction: the two messages and the state."""
    key = {"pk": {"S": "USER#me"}}
    puts = [
        {"Put": {"TableName": stack.table_name, "Item": {**key, "sk": {"S": f"~STATE{n}"}, "v": {"N": str(n)}}}},
        {"Put": {"TableName": stack.table_name, "Item": {**key, "sk": {"S": f"~NOTE{n}a"}, "t": {"S": "hi " * 20}}}},
        {"Put": {"TableName": stack.table_name, "Item": {**key, "sk": {"S": f"~NOTE{n}b"}, "t": {"S": "ok " * 20}}}},
    ]
    stack.operator_client().transact_write_items(TransactItems=puts)


def test_a_save_writes_what_changed_not_the_table(tmp_path: Path) -> None:
    written: dict[int, int] = {}
    for items in (20, 20_000):
        data_file = tmp_path / f"table-{items}.jsonl"
        write_snapshot(data_file, (_other_user(n) for n in range(items)))
        with LocalStack(data_file, enforce_iam=False) as stack:
            stack.save()  # nothing changed yet
            _turn(stack, 1)
            stack.operator_client().delete_item(
                TableName=stack.table_name, Key={"pk": {"S": "USER#me"}, "sk": {"S": "~NOTE1b"}}
            )
            before = _bytes_written()
            stack.save()
            written[items] = _bytes_written() - before
            assert journal_path(data_file).exists()
        # Stopped: the snapshot holds every item, the turn's included, and the journal is folded in.
        assert not journal_path(data_file).exists()
        kept = read_table(data_file, ["pk", "sk"])
        assert len(kept) == items + 2
        assert {"pk": {"S": "USER#me"}, "sk": {"S": "~NOTE1b"}} not in [{k: i[k] for k in ("pk", "sk")} for i in kept]
    # The same turn costs the same bytes at 20 items and at 20,000 (the whole table is ~4 MB).
    assert written[20_000] <= written[20] * 1.5 + 2_048, written
    assert written[20_000] < 20_000, written


def test_a_journal_left_by_a_stack_that_was_killed_is_loaded_and_folded_in(tmp_path: Path) -> None:
    data_file = tmp_path / "table.jsonl"
    write_snapshot(data_file, [_other_user(1)])
    with LocalStack(data_file, enforce_iam=False) as stack:
        _turn(stack, 1)
        stack.save()
        journal = journal_path(data_file).read_text(encoding="utf-8")
    # As if the stack had been killed after its last save: the snapshot of before, and the journal.
    write_snapshot(data_file, [_other_user(1)])
    journal_path(data_file).write_text(journal, encoding="utf-8")
    with LocalStack(data_file, enforce_iam=False) as stack:
        assert not journal_path(data_file).exists()  # folded into the snapshot as the stack started
        assert len(list(stack.items())) == 4
    assert len(read_table(data_file, ["pk", "sk"])) == 4


def test_a_journal_without_its_data_file_is_dropped(tmp_path: Path) -> None:
    """A stack writes its snapshot as it starts, so a journal is only ever beside one: a journal
    alone is what is left of a table the person deleted (to forget everyone), not a table to bring back."""
    data_file = tmp_path / "table.jsonl"
    with LocalStack(data_file, enforce_iam=False) as stack:
        assert data_file.exists()  # the (empty) snapshot, from the start
        _turn(stack, 1)
        stack.save()
        journal = journal_path(data_file).read_text(encoding="utf-8")
    data_file.unlink()
    journal_path(data_file).write_text(journal, encoding="utf-8")
    with LocalStack(data_file, enforce_iam=False) as stack:
        assert list(stack.items()) == []
        assert not journal_path(data_file).exists()

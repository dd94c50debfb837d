"""The local data file is written atomically and owned by one stack at a time."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.local.data import (
    DamagedDataFileError,
    DataLock,
    StackState,
    append_changes,
    atomic_write,
    change_line,
    journal_path,
    read_state,
    read_table,
    running_stack,
    state_path,
    write_snapshot,
    write_state,
)


def _failing_items() -> Iterator[dict[str, Any]]:
    yield {"pk": {"S": "USER#a"}, "sk": {"S": "STATE"}}
    raise ConnectionError("the server went away mid-scan")


def test_a_save_that_fails_midway_keeps_the_old_file_and_leaves_nothing_behind(tmp_path: Path) -> None:
    data_file = tmp_path / "dynamodb.jsonl"
    data_file.write_text('{"old": 1}\n', encoding="utf-8")
    with pytest.raises(ConnectionError):
        write_snapshot(data_file, _failing_items())
    assert data_file.read_text(encoding="utf-8") == '{"old": 1}\n'
    assert [path.name for path in tmp_path.iterdir()] == ["dynamodb.jsonl"]  # no .partial, no temporary


def test_a_save_replaces_the_file_whole(tmp_path: Path) -> None:
    data_file = tmp_path / "dynamodb.jsonl"
    items = [{"pk": {"S": "USER#a"}, "sk": {"S": str(n)}} for n in range(3)]
    write_snapshot(data_file, iter(items))
    assert [json.loads(line) for line in data_file.read_text(encoding="utf-8").splitlines()] == items
    assert [path.name for path in tmp_path.iterdir()] == ["dynamodb.jsonl"]


def _item(sk: str, text: str = "hi", raw: bytes = b"\x00\xff") -> dict[str, Any]:
    return {"pk": {"S": "USER#a"}, "sk": {"S": sk}, "text": {"S": text}, "key": {"B": raw}}


def test_the_journal_replays_puts_and_deletes_over_the_snapshot_and_is_folded_in(tmp_path: Path) -> None:
    data_file = tmp_path / "dynamodb.jsonl"
    write_snapshot(data_file, [_item("1"), _item("2")])
    append_changes(data_file, [change_line("put", _item("2", "changed")), change_line("put", _item("3"))])
    append_changes(data_file, [change_line("delete", {"pk": {"S": "USER#a"}, "sk": {"S": "1"}})])
    assert read_table(data_file, ["pk", "sk"]) == [_item("2", "changed"), _item("3")]
    write_snapshot(data_file, read_table(data_file, ["pk", "sk"]))
    assert not journal_path(data_file).exists()
    assert read_table(data_file, ["pk", "sk"]) == [_item("2", "changed"), _item("3")]


def test_a_journal_line_a_crash_cut_short_is_skipped_and_a_damaged_one_moved_aside(tmp_path: Path) -> None:
    data_file = tmp_path / "dynamodb.jsonl"
    write_snapshot(data_file, [_item("1")])
    append_changes(data_file, [change_line("put", _item("2"))])
    with journal_path(data_file).open("a", encoding="utf-8") as journal:
        journal.write(change_line("put", _item("3"))[:20])  # no end of line: the append never finished
    assert read_table(data_file, ["pk", "sk"]) == [_item("1"), _item("2")]
    journal_path(data_file).write_text(
        '{"put": {"pk": {"S": "USER#a"}, "sk": {"S": "4"}}}\n{"oops": 1}\n', encoding="utf-8"
    )
    with pytest.raises(DamagedDataFileError, match=r"journal.jsonl is damaged \(line 2 is not a DynamoDB change\)"):
        read_table(data_file, ["pk", "sk"])
    assert [path.name for path in tmp_path.iterdir() if "damaged" in path.name]
    assert read_table(data_file, ["pk", "sk"]) == [_item("1")]  # the snapshot alone, untouched


def test_atomic_write_interrupted_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old", encoding="utf-8")

    def lines() -> Iterator[str]:
        yield "new"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, lines())
    assert target.read_text(encoding="utf-8") == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_one_owner_at_a_time(tmp_path: Path) -> None:
    data_file = tmp_path / "d.jsonl"
    first, second = DataLock(data_file), DataLock(data_file)
    assert first.try_acquire()
    assert not second.try_acquire()
    first.release()
    assert second.try_acquire()
    second.release()


def test_a_state_file_without_a_live_owner_is_stale_and_removed(tmp_path: Path) -> None:
    data_file = tmp_path / "d.jsonl"
    write_state(data_file, StackState(pid=999_999_999, command="x", environment={}, twilio_url=""))
    assert read_state(data_file) is not None
    assert running_stack(data_file) is None
    assert not state_path(data_file).exists()

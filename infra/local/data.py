"""Owns who writes the local data file (.local/dynamodb.jsonl by default), and how.

One local stack at a time owns a data file: it holds an exclusive lock on `<name>.lock` beside it
(`fcntl.flock`, released by the system even when the process is killed) and publishes where its
servers listen in `<name>.stack.json`. The other tools read that state file and attach to the
running stack instead of starting one of their own on the same file, which would overwrite each
other's turns.

The data file is a snapshot of the table, one DynamoDB-JSON item a line; while a stack runs, what
changes is appended to its journal, `<name>.journal.jsonl` (`{"put": item}` or `{"delete": key}`
a line), so a save costs what changed, not the table. The journal is folded into the snapshot when
a stack starts and when it stops. Every write of the snapshot or the state file is atomic: a
temporary file in the same folder, then `os.replace`, so a crash leaves the old file or the new
one, never half of one; a crash mid-append leaves at most a last journal line without its end,
which is skipped.
"""

import base64
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from infra.local.errors import LocalToolError
from infra.local.ports import NotAnsweringError, check_answers

REPO_ROOT = Path(__file__).resolve().parents[2]
STATE_WAIT_S = 10.0  # how long a stack that holds the lock may take to publish its state (its start-up)


class DataFileInUseError(LocalToolError):
    pass


class DamagedDataFileError(LocalToolError):
    """The data file holds a line that is not a table item: it was moved aside, unchanged."""


def _binary(value: Any, convert: Any) -> Any:
    """An attribute value with its binary parts (`B`, `BS`, inside `M` and `L` too) converted."""
    if not isinstance(value, dict):
        return value
    if "B" in value:
        return {"B": convert(value["B"])}
    if "BS" in value:
        return {"BS": [convert(b) for b in value["BS"]]}
    if "M" in value:
        return {"M": {k: _binary(v, convert) for k, v in value["M"].items()}}
    if "L" in value:
        return {"L": [_binary(v, convert) for v in value["L"]]}
    return value


def item_line(item: dict[str, Any]) -> str:
    """One item as a line of the data file: DynamoDB JSON, binary values in base64 as on the wire
    (the client hands them over as bytes, which JSON cannot hold)."""
    encoded = {name: _binary(value, lambda b: base64.b64encode(b).decode()) for name, value in item.items()}
    return json.dumps(encoded, ensure_ascii=False) + "\n"


def change_line(kind: str, item: dict[str, Any]) -> str:
    """One change as a line of the journal: `put` (the whole item) or `delete` (its key)."""
    return json.dumps({kind: json.loads(item_line(item))}, ensure_ascii=False) + "\n"


def journal_path(data_file: Path) -> Path:
    return data_file.with_suffix(".journal.jsonl")


def _is_item(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(attribute, dict) for attribute in value.values())


def _lines(path: Path, journal: bool) -> Iterator[dict[str, Any]]:
    """Each line of the data file (an item) or of its journal (a change), decoded; a line that is
    neither moves the file aside (DamagedDataFileError). A journal's last line without its end is a
    crash mid-append: skipped."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    if journal:
        lines = lines[:-1]  # "" after the last line's end, or a line a crash cut short
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as error:
            raise _damaged(path, journal, f"line {number} is not JSON: {error.args[0].split(':')[0]}") from None
        change = entry if journal else {"put": entry}
        item: Any
        kind, item = next(iter(change.items())) if isinstance(change, dict) and len(change) == 1 else ("", None)
        if kind not in ("put", "delete") or not _is_item(item):
            raise _damaged(path, journal, f"line {number} is not a DynamoDB {'change' if journal else 'item'}")
        yield {kind: {name: _binary(value, base64.b64decode) for name, value in item.items()}}


def read_table(data_file: Path, key_names: list[str]) -> list[dict[str, Any]]:
    """The items the data file and its journal hold together (the snapshot, then each change in
    order), [] when neither exists. A damaged file is moved aside (`<name>.damaged-<time>`) so the
    next start does not fail again, and nothing of it is lost: DamagedDataFileError says where it
    went and how to get it back."""
    items: dict[str, dict[str, Any]] = {}
    for path, journal in ((data_file, False), (journal_path(data_file), True)):
        if not path.exists():
            continue
        for change in _lines(path, journal):
            ((kind, item),) = change.items()
            key = json.dumps([item[name] for name in key_names], sort_keys=True, default=str)
            if kind == "put":
                items[key] = item
            else:
                items.pop(key, None)
    return list(items.values())


def write_snapshot(data_file: Path, items: Iterable[dict[str, Any]]) -> None:
    """`items` as the new data file, atomically; then its journal, folded into it, is removed."""
    atomic_write(data_file, (item_line(item) for item in items))
    journal_path(data_file).unlink(missing_ok=True)


def append_changes(data_file: Path, lines: list[str]) -> None:
    """Changes (`change_line`s) at the end of the data file's journal, on disk before this returns."""
    if lines:
        with journal_path(data_file).open("a", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())


def _damaged(path: Path, journal: bool, what: str) -> DamagedDataFileError:
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(path, aside)
    start = "from the data file without its changes" if journal else "with an empty table"
    if not journal and journal_path(path).exists():  # its changes mean nothing without it: kept with it
        os.replace(journal_path(path), aside.with_name(aside.name + ".journal"))
    return DamagedDataFileError(
        f"{path} is damaged ({what}); it was moved to {aside} and nothing was loaded. "
        f"Run the command again to start {start}, or fix that line and `mv {aside} {path}` to recover the rest"
    )


def local_folder() -> Path:
    """The repository's `.local/` (what the tools keep: the data file, logs, reports): written as
    `.local` when the command runs from the repository's root, as the README shows it; the same
    folder, in full, from a subfolder, so a tool run there finds the same memory. Run from outside
    the repository (with the tools on the path), `.local` of the folder it runs in."""
    try:
        here = Path.cwd().resolve()
    except OSError:  # the working directory was removed
        return REPO_ROOT / ".local"
    inside = here != REPO_ROOT and here.is_relative_to(REPO_ROOT)
    return REPO_ROOT / ".local" if inside else Path(".local")


def lock_path(data_file: Path) -> Path:
    return data_file.with_suffix(".lock")


def state_path(data_file: Path) -> Path:
    return data_file.with_suffix(".stack.json")


def atomic_write(path: Path, lines: Iterable[str]) -> None:
    """Write `lines` to `path` atomically; on any failure the old file stays and no temporary is left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, before the rename
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


class DataLock:
    """The exclusive lock on a data file: one owner at a time, across processes."""

    def __init__(self, data_file: Path) -> None:
        self.path = lock_path(data_file)
        self._handle: IO[str] | None = None

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


@dataclass(frozen=True)
class StackState:
    """What a running stack publishes: who it is and how to reach it."""

    pid: int
    command: str  # the tool that started it, e.g. "infra.local_stack"
    environment: dict[str, str | None]  # what a process sets to use it (endpoints, table, queue); None: unset
    twilio_url: str
    api_url: str | None = None  # None: this stack serves no HTTP API (infra.chat's own)
    children: list[int] = field(default_factory=list)  # its child servers' process ids

    @property
    def dynamodb_url(self) -> str:
        return str(self.environment["AWS_ENDPOINT_URL_DYNAMODB"])

    def describe(self) -> str:
        return f"{self.command} (pid {self.pid})"


def write_state(data_file: Path, state: StackState) -> None:
    atomic_write(state_path(data_file), [json.dumps(asdict(state), indent=1)])


def read_state(data_file: Path) -> StackState | None:
    try:
        raw: dict[str, Any] = json.loads(state_path(data_file).read_text(encoding="utf-8"))
        return StackState(**raw)
    except (OSError, ValueError, TypeError):  # absent, being replaced, or not ours
        return None


def remove_state(data_file: Path) -> None:
    state_path(data_file).unlink(missing_ok=True)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process, alive
        return True
    return True


def running_stack(data_file: Path, wait_s: float = STATE_WAIT_S) -> StackState | None:
    """The live stack that owns `data_file`, or None when no process holds its lock (a state file
    left by a stack that was killed is removed then). DataFileInUseError when the lock is held but no
    answering stack is found within `wait_s` (seconds for one that is still starting)."""
    deadline = time.monotonic() + wait_s
    while True:
        probe = DataLock(data_file)
        if probe.try_acquire():
            remove_state(data_file)
            probe.release()
            return None
        state = read_state(data_file)
        if state is not None and process_alive(state.pid):
            try:
                check_answers(state.dynamodb_url, f"the local stack {state.describe()}, using {data_file},")
            except NotAnsweringError as error:
                raise DataFileInUseError(f"{error}; stop it (kill {state.pid}) and try again") from None
            return state
        if time.monotonic() > deadline:
            raise DataFileInUseError(
                f"{data_file} is locked by another process ({lock_path(data_file)}), which published no running "
                "stack; stop the other local tool using it, or pass --data-file with another file"
            )
        time.sleep(0.1)


def in_use_error(data_file: Path) -> DataFileInUseError:
    """What a second stack on a data file is told: who holds it, and what to do instead."""
    state = read_state(data_file)
    owner = state.describe() if state is not None else "another local tool"
    return DataFileInUseError(
        f"{data_file} is in use by {owner}; only one local stack may write it at a time. "
        "The other tools (infra.chat, infra.invoke, infra.sms, infra.inspect_prompt) attach to it; "
        "to start another stack, stop that one first or pass --data-file with another file"
    )

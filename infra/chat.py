"""Talk to the coach in the terminal, on the embedded local stack (no Docker, no AWS account).

    python -m infra.chat                       # interactive; /quit, Ctrl-D or Ctrl-C to leave
    python -m infra.chat --user sam --script conversation.txt   # one message a line
    echo "I'm a beginner" | python -m infra.chat --script -

The conversation is kept in --data-file (default .local/dynamodb.jsonl) and is there again the
next time you start. While `python -m infra.local_stack` runs on that file, the chat uses that
stack instead of starting its own. --reset forgets the --user first, as DELETE /me does (their
messages, state, profile, phones, link codes, recall vectors and check-in schedule); --reset-all
forgets every user and every check-in schedule. With --aws the real AWS account
of your environment is used instead (TABLE_NAME, AWS_REGION and credentials must be set).
--flags FILE takes the memory's feature flags from FILE (docs/rollout.md); an edit applies
within FEATURE_FLAGS_MAX_AGE_S (60 s), without a restart.
`/later 1d` (or 3h, 2w) moves the local clock on: the check-ins it passes arrive (docs/decisions/0035).
"""

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from infra.local.errors import INTERRUPTED, run_tool
from infra.local.flags import FLAGS_FILE_VARIABLE, checked_flags_file
from infra.local.iam.identity import acting_as
from infra.local.shared_stack import ToolStack, stack_for
from infra.local.stack import DEFAULT_DATA_FILE, add_iam_option
from infra.local.terminal import functions_log_to, log_file_of
from onboarding.composition import build_account, build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.model.errors import InvalidMessageError, ModelUnavailableError, RateLimitedError, StoreError
from onboarding.turn.service import TurnService

QUIT_COMMANDS = {"/quit", "/exit"}
LATER = re.compile(r"^/later\s+(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# Moves the local clock on by the duration; the check-ins it passed, as lines to show.
Later = Callable[[timedelta], list[str]]
DEFAULT_USER = "local-user"  # also the user the memory console opens on
CHAT_FUNCTION = "ApiFunction"  # whose turns these are: the terminal stands in for the mobile app


def _interactive_lines() -> Iterator[str]:
    while True:
        try:
            yield input("you> ")
        except EOFError:
            print()
            return


def _script_lines(source: TextIO) -> Iterator[str]:
    for line in source:
        text = line.rstrip("\n")
        if text.strip():
            print(f"you> {text}")
            yield text


async def _turn(service: TurnService, user_id: str, line: str, out: TextIO) -> None:
    turn = await service.start_turn(user_id, line)
    out.write("coach> ")
    async for chunk in turn:
        out.write(chunk)
        out.flush()
    out.write("\n")
    await turn.fold_summary()  # after the reply is on screen, as the functions do


def converse(
    service: TurnService,
    user_id: str,
    lines: Iterable[str],
    after_turn: Callable[[], None],
    out: TextIO,
    later: Later | None = None,
) -> int:
    """Run every line as a turn, streaming replies to `out`; returns how many turns failed.

    Each turn runs on one event loop kept for the whole conversation, and the next line is read
    while no loop runs: a Ctrl-C at the prompt is then a plain KeyboardInterrupt, and one during a
    reply cancels the turn and ends the loop's work before it propagates."""
    failures = 0
    with asyncio.Runner() as runner:
        for line in lines:
            if line.strip() in QUIT_COMMANDS:
                break
            if not line.strip():
                continue  # an empty Enter sends nothing
            if line.strip().startswith("/later"):
                out.write(_later(line.strip(), later))
                continue
            try:
                runner.run(_turn(service, user_id, line, out))
            except (InvalidMessageError, ModelUnavailableError, RateLimitedError, StoreError) as error:
                failures += 1
                out.write(f"\n[not sent: {error}]\n")
            after_turn()
    return failures


def _later(command: str, later: Later | None) -> str:
    """What `/later <n><m|h|d|w>` shows: each check-in the moved clock delivered, or why none."""
    found = LATER.match(command)
    if found is None:
        return "[/later takes a duration: 30m, 3h, 1d or 2w]\n"
    if later is None:
        return "[/later moves the local stack's clock; there is none with --aws]\n"
    shown = later(timedelta(**{_UNITS[found.group(2)]: int(found.group(1))}))
    return "".join(f"{line}\n" for line in shown) or "[no check-in in that time]\n"


def check_ins_later(user_id: str) -> Later:
    """The chat's local clock: the schedules in the local stack's scheduler, fired as they come due
    (infra/local/check_in_clock.py); the lines of `user_id`'s check-ins it delivered."""
    from infra.local.check_in_clock import CheckInClock
    from infra.local.lambda_runner import invoke
    from infra.local.stack import admin_client

    settings = Settings.from_env()
    scheduler = admin_client("scheduler", settings.region, os.environ["AWS_ENDPOINT_URL_SCHEDULER"])
    clock = CheckInClock(scheduler, str(settings.check_in_schedule_group), lambda e: invoke("CheckInFunction", e))
    store = build_repositories(settings)

    def later(by: timedelta) -> list[str]:
        shown = []
        for firing, answer in clock.advance(by):
            if firing.event.get("user_id") != user_id:
                continue
            when = f"{firing.at:%a %d %b %H:%M} UTC"
            if answer["status"] in ("sent", "stored"):
                newest = store.conversations.load_turn(user_id, 1).messages[-1].content
                shown.append(f"coach (check-in, {when})> {newest}")
            else:
                shown.append(f"[check-in of {when} not sent: {answer['status'].replace('_', ' ')}]")
        return shown

    return later


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default=DEFAULT_USER, help=f"user id to talk as (default: {DEFAULT_USER})")
    parser.add_argument(
        "--script", type=argparse.FileType("r", encoding="utf-8"), help="file of messages, one a line ('-' for stdin)"
    )
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE, help="where the local table is kept")
    parser.add_argument("--reset", action="store_true", help="forget the --user before starting")
    parser.add_argument("--reset-all", action="store_true", help="forget every user in the data file before starting")
    parser.add_argument("--chunk-delay", type=float, default=0.03, help="seconds between the local model's tokens")
    parser.add_argument("--aws", action="store_true", help="use real AWS instead of the local stack")
    parser.add_argument(
        "--flags",
        type=Path,
        help="feature flags JSON file (docs/rollout.md); edits apply within FEATURE_FLAGS_MAX_AGE_S",
    )
    add_iam_option(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    arguments = parser.parse_args(argv)
    # Checked first: a bad file stops the command before it changes anything, its environment included.
    flags_file = None if arguments.flags is None else checked_flags_file(arguments.flags)
    # A terminal conversation, not a Lambda: the per-turn CloudWatch metric lines would only clutter it.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    if arguments.aws and arguments.reset_all:
        parser.error("--reset-all forgets everyone in the local data file; it does not work with --aws")
    stack: AbstractContextManager[ToolStack | None] = (
        nullcontext()
        if arguments.aws
        else stack_for(arguments.data_file, "infra.chat", arguments.chunk_delay, enforce_iam=not arguments.no_iam)
    )
    saved = "Stopped."
    try:
        with ExitStack() as closing, stack as local:  # the log file outlives the stack's last lines
            if local is not None:
                saved = f"Stopped; the conversation is {local.describe_saving()}."
                if not local.attached:
                    # This process runs the stack's recall indexer (fed from the table's stream): its
                    # log lines go to a file, not between the conversation's lines.
                    closing.enter_context(functions_log_to(log_file_of(arguments.data_file, "chat")))
            if flags_file is not None:  # this process's turns read it, even beside a stack started without it
                os.environ[FLAGS_FILE_VARIABLE] = str(flags_file)
                for name in ("FEATURE_FLAGS_APPLICATION", "FEATURE_FLAGS_ENVIRONMENT", "FEATURE_FLAGS_PROFILE"):
                    os.environ.pop(name, None)  # the file, not the stack's AppConfig
            try:
                settings = Settings.from_env()
            except ValidationError as error:
                fields = ", ".join(str(item["loc"][0]) for item in error.errors())
                parser.error(f"configuration is incomplete or invalid ({fields}); see the README's configuration table")
            if arguments.reset_all and local is not None:  # the operator's: the whole table, not one user
                print(f"Forgetting every user in {arguments.data_file} (--reset-all)...", file=sys.stderr)
                items, schedules = local.forget_everyone()
                print(f"Forgot everyone: {items} items and {schedules} check-in schedules deleted.", file=sys.stderr)
            # The conversation runs as the mobile API would run it, with its permissions (its
            # DELETE /me erases as --reset does).
            with acting_as(CHAT_FUNCTION):
                store = build_repositories(settings)
                if arguments.reset:
                    report = build_account(settings, store).erase(arguments.user)
                    print(
                        f"Forgot {arguments.user!r}: {report.total} items deleted; other users kept.", file=sys.stderr
                    )
                service = build_turn_service(settings, store)
                if arguments.script is None:
                    where = local.describe_saving() if local is not None else f"in the table {settings.table_name}"
                    print(f"Talking as {arguments.user!r}. Memory is {where} (--reset forgets it). /quit to leave.")
                lines = _script_lines(arguments.script) if arguments.script else _interactive_lines()
                save = local.save if local is not None else (lambda: None)
                later = None if local is None else check_ins_later(arguments.user)
                failures = converse(service, arguments.user, lines, save, sys.stdout, later)
    except KeyboardInterrupt:
        # Reached after the `with` blocks: the turn is cancelled, the table saved, the servers stopped.
        print(f"\n{saved}", file=sys.stderr)
        return INTERRUPTED
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run_tool(main))

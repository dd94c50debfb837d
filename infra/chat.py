"""Talk to the coach in the terminal, on the embedded local stack (no Docker, no AWS account).

    python -m infra.chat                       # interactive; /quit or Ctrl-D to leave
    python -m infra.chat --user sam --script conversation.txt   # one message a line
    echo "I'm a beginner" | python -m infra.chat --script -

The conversation is kept in --data-file (default .local/dynamodb.jsonl) and is there again the
next time you start; --reset deletes it first. With --aws the real AWS account of your
environment is used instead (TABLE_NAME, AWS_REGION and credentials must be set).
"""

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from infra.local_stack import LocalStack
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.model.errors import InvalidMessageError, ModelUnavailableError, StoreError
from onboarding.turns import TurnService

DEFAULT_DATA_FILE = Path(".local/dynamodb.jsonl")
QUIT_COMMANDS = {"/quit", "/exit"}


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


async def converse(
    service: TurnService, user_id: str, lines: Iterable[str], after_turn: Callable[[], None], out: TextIO
) -> int:
    """Run every line as a turn, streaming replies to `out`; returns how many turns failed."""
    failures = 0
    for line in lines:
        if line.strip() in QUIT_COMMANDS:
            break
        try:
            turn = await service.start_turn(user_id, line)
            out.write("coach> ")
            async for chunk in turn:
                out.write(chunk)
                out.flush()
            out.write("\n")
            await turn.fold_summary()  # after the reply is on screen, as the functions do
        except (InvalidMessageError, ModelUnavailableError, StoreError) as error:
            failures += 1
            out.write(f"\n[not sent: {error}]\n")
        after_turn()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default="local-user", help="user id to talk as (default: local-user)")
    parser.add_argument(
        "--script", type=argparse.FileType("r", encoding="utf-8"), help="file of messages, one a line ('-' for stdin)"
    )
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE, help="where the local table is kept")
    parser.add_argument("--reset", action="store_true", help="forget everything stored locally before starting")
    parser.add_argument("--chunk-delay", type=float, default=0.03, help="seconds between the local model's tokens")
    parser.add_argument("--aws", action="store_true", help="use real AWS instead of the local stack")
    arguments = parser.parse_args(argv)
    if arguments.reset and arguments.data_file.exists():
        arguments.data_file.unlink()
    stack = None if arguments.aws else LocalStack(arguments.data_file, arguments.chunk_delay)
    with stack if stack is not None else nullcontext():
        try:
            settings = Settings.from_env()
        except ValidationError as error:
            fields = ", ".join(str(item["loc"][0]) for item in error.errors())
            parser.error(f"configuration is incomplete or invalid ({fields}); see the README's configuration table")
        service = build_turn_service(settings)
        if arguments.script is None:
            print(
                f"Talking as {arguments.user!r}. Memory is kept in {arguments.data_file} "
                "(--reset forgets it). /quit to leave."
            )
        lines = _script_lines(arguments.script) if arguments.script else _interactive_lines()
        save = stack.save if stack is not None else (lambda: None)
        failures = asyncio.run(converse(service, arguments.user, lines, save, sys.stdout))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Owns how a local tool (infra.chat, infra.invoke, infra.sms, infra.inspect_prompt) gets its stack:
the one already running on its data file (infra.local_stack, or another tool's), else one of its
own, which the next tool then attaches to. Two stacks never write one data file (infra/local/data.py)."""

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.local.data import DataFileInUseError, StackState, running_stack
from infra.local.deployment import LOCAL_REGION
from infra.local.stack import LocalStack, temporary_environment


@dataclass(frozen=True)
class ToolStack:
    """The stack a tool runs on; inside the `with`, the process environment points at it."""

    state: StackState
    data_file: Path
    attached: bool  # True: another process's stack, which saves the data file itself
    save: Callable[[], None]

    def describe_saving(self) -> str:
        if self.attached:
            return f"kept by the local stack of {self.state.describe()}, which saves it to {self.data_file}"
        return f"saved in {self.data_file}"

    def forget_everyone(self) -> tuple[int, int]:
        """Delete every item of the conversation table and every check-in schedule; how many of each."""
        import boto3

        table: Any = boto3.resource("dynamodb", region_name=LOCAL_REGION).Table(
            str(self.state.environment["TABLE_NAME"])
        )
        key_names = [key["AttributeName"] for key in table.key_schema]
        scan: dict[str, Any] = {"ProjectionExpression": ", ".join(key_names), "ConsistentRead": True}
        deleted = 0
        with table.batch_writer() as batch:
            while True:
                page = table.scan(**scan)
                for item in page["Items"]:
                    batch.delete_item(Key=item)
                    deleted += 1
                if "LastEvaluatedKey" not in page:
                    break
                scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        from infra.local.check_in_clock import schedule_names

        scheduler = boto3.client("scheduler", region_name=LOCAL_REGION)
        group = str(self.state.environment["CHECK_IN_SCHEDULE_GROUP"])
        names = schedule_names(scheduler, group)
        for name in names:
            scheduler.delete_schedule(Name=name, GroupName=group)
        self.save()
        return deleted, len(names)


@contextmanager
def stack_for(
    data_file: Path,
    command: str,
    chunk_delay_s: float = 0.0,
    serve_api: bool = False,
    overrides: Mapping[str, str | None] | None = None,
    enforce_iam: bool = True,
) -> Iterator[ToolStack]:
    """The running stack of `data_file`, or a new one (with the HTTP API if `serve_api`) that this
    tool owns until the `with` ends. `overrides` are set on top of the stack's environment (None
    unsets). Attached or not, this process's functions then sign as themselves (the running stack
    enforces the template's policies unless it was started with --no-iam; `enforce_iam` is for a
    stack of the tool's own)."""
    for attempt in range(2):
        state = running_stack(data_file)
        if state is not None:
            print(
                f"Using the local stack (pid {state.pid}) that {state.command} started ({data_file}).", file=sys.stderr
            )
            with temporary_environment({**state.environment, **(overrides or {})}), _signing_as_functions():
                yield ToolStack(state, data_file, attached=True, save=lambda: None)
            return
        try:
            stack = LocalStack(
                data_file,
                chunk_delay_s,
                api_port=0 if serve_api else None,
                command=command,
                enforce_iam=enforce_iam,
            )
        except DataFileInUseError:
            if attempt:
                raise
            continue  # another tool took the file between our look and our start: attach to it instead
        with stack, temporary_environment(overrides or {}):
            yield ToolStack(stack.state(), data_file, attached=False, save=stack.save)
        return


@contextmanager
def _signing_as_functions() -> Iterator[None]:
    """boto3's default session signing as the function running (infra/local/iam/identity.py), for
    this tool's own functions on another process's stack."""
    import boto3

    from infra.local.iam.identity import new_session

    saved, boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION, new_session(LOCAL_REGION)
    try:
        yield
    finally:
        boto3.DEFAULT_SESSION = saved

"""Show exactly what the coach would send to the model for a user right now.

    python -m infra.inspect_prompt USER_ID                      # on the local data file
    python -m infra.inspect_prompt USER_ID --message "Hi again"  # as if they said this now
    python -m infra.inspect_prompt USER_ID --personal-data       # show the texts themselves
    python -m infra.inspect_prompt USER_ID --aws                 # on the real table

It prints the system prompt, the window of history, and the token budget used. What the person
said or told about themself is redacted unless --personal-data is given: their messages, the
stored answers, the profile and the summary show as their lengths only.
"""

import argparse
import asyncio
import json
import re
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TextIO

from infra.local.errors import run_tool
from infra.local.shared_stack import ToolStack, stack_for
from infra.local.stack import DEFAULT_DATA_FILE
from infra.local.terminal import audit_lines_to
from onboarding.agents.base import PromptPlan
from onboarding.audit import Caller
from onboarding.composition import build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.model.immutable import thaw
from onboarding.turn.orchestrator import PreparedTurn
from onboarding.turn.service import TurnService

_VALUE_LINE = re.compile(r"^(- [^:]+: )(.+)$")
_PERSONAL_SECTIONS = (
    "Already known:",
    "About the client",
    "Summary of the earlier conversation:",
    "From earlier conversations",
)


def _redacted(text: str) -> str:
    return f"[redacted: {len(text)} characters]"


def redact_system_prompt(system: str) -> str:
    """The system prompt with every value in its personal sections replaced by its length."""
    lines: list[str] = []
    personal = False
    for line in system.splitlines():
        if line.startswith(_PERSONAL_SECTIONS):
            personal = True
        elif not line.strip():
            personal = False
        elif personal and (match := _VALUE_LINE.match(line)):
            line = match[1] + _redacted(match[2])
        elif personal:
            line = _redacted(line)
        elif line.startswith("Address the client as "):
            line = "Address the client as " + _redacted(line.removeprefix("Address the client as ").rstrip("."))
        lines.append(line)
    return "\n".join(lines)


def render(prepared: PreparedTurn, plan: PromptPlan, personal_data: bool, out: TextIO) -> None:
    show = (lambda text: text) if personal_data else _redacted
    agent = prepared.agent
    out.write(f"Step: {agent.agent_type.value}\n")
    out.write(f"Budget: {plan.total_tokens} of {plan.budget} tokens (system {plan.system_tokens}, ")
    out.write(f"window {plan.window_tokens}, current message {plan.current_tokens})\n")
    out.write(f"Window: {len(plan.window)} messages; {plan.left_out} left out by the budget\n")
    if plan.system_left_out:  # what of the memory the system prompt's allowance had no room for
        gave_way = ", ".join(f"{count} {kind}" for kind, count in sorted(plan.system_left_out.items()))
        out.write(f"System prompt: gave way to fit its allowance: {gave_way}\n")
    loaded = prepared.loaded
    out.write(f"Loaded: {len(loaded.messages)} messages, current conversation from #{prepared.conversation_start}; ")
    out.write(f"summary covers through {loaded.summary.through_message_id if loaded.summary else 'nothing'}\n")
    out.write("\n=== system prompt ===\n")
    out.write((plan.system if personal_data else redact_system_prompt(plan.system)) + "\n")
    out.write("\n=== window ===\n")
    for turn in plan.window:
        line = f"[{turn.role}] {show(turn.content) if turn.content else ''}"
        for call in turn.tool_calls:
            args = (
                json.dumps(thaw(call.args), ensure_ascii=False)
                if personal_data
                else _redacted(json.dumps(thaw(call.args)))
            )
            line += f" -> {call.name}({args})"
        out.write(line.rstrip() + "\n")
    out.write(f"\n=== current message ===\n[user] {show(plan.current)}\n")


async def load_plan(
    service: TurnService, user_id: str, message: str, caller: Caller
) -> tuple[PreparedTurn, PromptPlan]:
    """What a turn for `message` would load (one Query), recall (one embedding and one index query)
    and send the model, as the turn computes it, storing nothing (`TurnService.preview`). The memory
    console shows the same plan, so its counts are this command's. The reads are in the audit
    trail, as `caller`'s."""
    prepared = (await service.preview(user_id, message, caller)).prepared
    return prepared, prepared.agent.prompt_plan(message)


async def inspect(settings: Settings, user_id: str, message: str, personal_data: bool, out: TextIO) -> PromptPlan:
    caller = Caller.command("infra.inspect_prompt")
    prepared, plan = await load_plan(
        build_turn_service(settings, build_repositories(settings)), user_id, message, caller
    )
    render(prepared, plan, personal_data, out)
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("user_id")
    parser.add_argument("--message", default="(your next message)", help="the message to plan for")
    parser.add_argument("--personal-data", action="store_true", help="show texts instead of their lengths")
    parser.add_argument("--aws", action="store_true", help="read the table of your AWS environment")
    parser.add_argument("--data-file", type=Path, default=DEFAULT_DATA_FILE)
    args = parser.parse_args(argv)
    local: AbstractContextManager[ToolStack | None] = (
        nullcontext() if args.aws else stack_for(args.data_file, "infra.inspect_prompt")
    )
    with local:
        audit_lines_to(sys.stderr)
        settings = Settings.from_env()
        asyncio.run(inspect(settings, args.user_id, args.message, args.personal_data, sys.stdout))
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))

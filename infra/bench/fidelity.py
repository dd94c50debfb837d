"""Memory fidelity evaluation: does every prompt hold every fact the current agent needs?

    uv run python -m infra.fidelity            # the full run (about 230 turns, a few minutes)
    uv run python -m infra.fidelity --quick    # a short run (CI)
    uv run python -m infra.fidelity --out docs # regenerate the committed docs/fidelity.*

It writes fidelity.md, fidelity.png and fidelity.json to --out (default .local/), its log lines
to fidelity.log there (-v prints them instead), and shows its progress on stderr.

A scripted client goes through the whole onboarding on the real local stack (the HTTP API and the
Twilio webhook of template.yaml, DynamoDB on moto's server, Bedrock's emulator through
langchain-aws): it states facts early (its name, an injury, its goal, ...) and answers the coach's
questions, with small talk between answers, a reset, a switch to SMS and back, and an idle gap.
For every turn, the first request the emulator received for it (the prompt of the turn) is
checked: is every fact the current step needs in it, and how big is it against the budget?

The baseline is a window-only memory: the step's prompt with nothing known, the last 15
messages before the turn, and the turn's message, rebuilt for every turn from the same stored
conversation.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from infra.bench.benchmark.report import quantile
from infra.bench.fidelity_script import (
    ANSWERS,
    COMPLETE,
    FACTS,
    GAP_S,
    PHONE,
    QUESTIONS,
    SEED_WINDOW,
    SMALL_TALK,
    SMS_FIELDS,
    STEP_BY_TITLE,
    TOKEN_BUDGET,
    USER,
    Fact,
    TurnRecord,
)
from infra.local.bedrock_emulator.recorded import RecordedRequest
from infra.local.data import local_folder
from infra.local.stack import LocalStack
from infra.local.terminal import Progress, logs_to
from infra.local.twilio_emulator import post_signed_text
from onboarding.composition import build_repositories
from onboarding.config import Settings
from onboarding.llm.prompt import render_system_prompt
from onboarding.llm.wording import SUMMARY_SYSTEM_PROMPT
from onboarding.memory.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from onboarding.model.messages import Message
from onboarding.model.state import OnboardingAgentType
from onboarding.persistence import Repositories

# The stand-ins' fidelity to the services' documented limits is a table of its own, kept by hand.
LIMITS_POINTER = (
    "\nHow closely the local stand-ins hold the services' documented limits (each limit, AWS's value\n"
    "and source, the product's worst case, the test that holds it): [service-limits.md](service-limits.md).\n"
)


def request_text(request: RecordedRequest) -> str:
    """Everything the model reads: system prompt, texts, tool calls and results."""
    parts = [request.system_text]
    for message in request.body.get("messages", []):
        for block in message.get("content", []):
            parts.append(block["text"] if "text" in block else json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def request_tokens(request: RecordedRequest) -> int:
    return count_tokens(request_text(request)) + MESSAGE_OVERHEAD_TOKENS * (1 + len(request.body.get("messages", [])))


def _step_of(request: RecordedRequest) -> str:
    if "Onboarding is complete" in request.system_text:
        return COMPLETE
    for line in request.system_text.splitlines():
        if line.startswith("Current step: "):
            return STEP_BY_TITLE[line.removeprefix("Current step: ").split(".", 1)[0]].value
    raise ValueError("a coaching request without a step")


class Client:
    """The scripted person: talks to the local stack's API and texts its Twilio webhook."""

    def __init__(self, stack: LocalStack, progress: Progress | None = None) -> None:
        self.stack = stack
        self.progress = progress
        self.http = httpx.Client(base_url=stack.api_url, headers={"Authorization": f"Bearer {USER}"}, timeout=60)
        self.channel = "app"
        self.records: list[TurnRecord] = []
        self.last_reply = ""

    def _coach_requests(self, since: int) -> list[RecordedRequest]:
        return [
            r for r in self.stack.bedrock.requests[since:] if not r.system_text.startswith(SUMMARY_SYSTEM_PROMPT[:30])
        ]

    def say(self, text: str) -> str:
        since = len(self.stack.bedrock.requests)
        reply = self._over_sms(text) if self.channel == "sms" else self._over_app(text)
        coach = self._coach_requests(since)
        record = TurnRecord(len(self.records) + 1, self.channel, "", text)
        if coach:
            record.step = _step_of(coach[0])
            record.prompt_tokens = request_tokens(coach[0])
            prompt = request_text(coach[0])
            stated = {fact for r in self.records for fact in _facts_in(r.text)}
            record.needed = [f.name for f in FACTS if f.name in stated and record.step in f.needed_by]
            record.present = [name for name in record.needed if _fact(name).found_in(prompt)]
        else:
            record.model_called = False
        self.records.append(record)
        self.last_reply = reply
        if self.progress is not None:
            self.progress.advance(note=f"{record.step or 'linking'} by {record.channel}")
        return reply

    def _over_app(self, text: str) -> str:
        response = self.http.post("/chat", json={"message": text, "clientMessageId": uuid.uuid4().hex})
        response.raise_for_status()
        return str(response.json()["reply"])

    def _over_sms(self, text: str) -> str:
        before = len(self.stack.twilio.sent)
        response = post_signed_text(f"{self.stack.api_url}/sms", PHONE, text)
        response.raise_for_status()
        if "<Message>" in response.text:  # answered at once (the link confirmation)
            return response.text
        sent = self.stack.twilio.wait_for(before + 1, timeout_s=60)
        time.sleep(0.3)  # a long reply arrives in several parts
        return " ".join(s.body for s in self.stack.twilio.sent[before:]) or sent[-1].body

    def link_phone(self) -> None:
        code = self.http.post("/phone-links").json()["code"]
        self.channel = "sms"
        self.say(f"LINK {code}")
        self.records[-1].model_called = False  # answered by the webhook, not the coach
        self.say("YES")  # the phone agrees to the link (nothing is linked before it does)
        self.records[-1].model_called = False


def _fact(name: str) -> Fact:
    return next(f for f in FACTS if f.name == name)


def _facts_in(text: str) -> set[str]:
    return {f.name for f in FACTS if f.found_in(text)}


def _asked_field(reply: str) -> str | None:
    return next((key for question, key in QUESTIONS.items() if question in reply), None)


def expected_turns(small_talk_per_answer: int) -> int:
    """About how many turns the script takes (for the progress line): every answer with its small
    talk, the opening, reset, phone link, gap and closing questions."""
    return len(ANSWERS) * (1 + small_talk_per_answer) + 10


def run_script(stack: LocalStack, small_talk_per_answer: int, progress: Progress | None = None) -> Client:
    client = Client(stack, progress)
    client.say("Hi! My name is Alexandra")
    client.say("Please call me Alex")
    answered: set[str] = set()
    talk = lost = 0
    reset_done = gap_done = False
    for _ in range(400):
        if client.records[-1].step == COMPLETE or "onboarding is complete" in client.last_reply.lower():
            break
        asked = _asked_field(client.last_reply)
        if asked is None:
            lost += 1
            if lost > 3:  # a script out of step with the coach would measure nothing
                raise RuntimeError(f"the coach stopped asking onboarding questions at turn {len(client.records)}")
            client.say("Sorry, what was the question?")
            continue
        lost = 0
        if asked == "target" and not reset_done:
            reset_done = True
            client.say("start over")
            client.say("Let's go on")
            continue
        if asked in SMS_FIELDS and client.channel == "app":
            client.link_phone()
            client.say("Hi, it's me on my phone now")
            continue
        if asked not in SMS_FIELDS and client.channel == "sms":
            client.channel = "app"
        if asked == "dietary_pattern" and not gap_done:
            gap_done = True
            time.sleep(GAP_S + 1)  # an idle gap: the next message starts a new conversation
            client.say("Back again, sorry for the break")
            continue
        for _ in range(small_talk_per_answer):
            client.say(SMALL_TALK[talk % len(SMALL_TALK)])
            talk += 1
        client.say(ANSWERS[asked])
        answered.add(asked)
    for question in (
        "Which days do I train again?",
        "What time zone did I give you?",
        "Anything to watch for my knee?",
    ):
        client.say(question)
    return client


def score_baseline(client: Client, store: Repositories) -> None:
    """The baseline's window-only prompt for every turn, from the same stored conversation."""
    messages: list[Message] = []
    cursor = None
    while True:
        page = store.conversations.history_page(USER, 100, cursor)
        messages.extend(page.messages)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    texts = [m for m in reversed(messages) if m.role != "tool" and m.content.strip()]
    user_positions = [i for i, m in enumerate(texts) if m.role == "user"]
    for record, position in zip(_user_turns(client.records), user_positions, strict=False):
        if not record.model_called or record.step == "":
            continue
        window = texts[max(0, position - SEED_WINDOW) : position + 1]
        step = OnboardingAgentType.SCHEDULING if record.step == COMPLETE else OnboardingAgentType(record.step)
        system = render_system_prompt(step, {})
        prompt = system + "\n" + "\n".join(m.content for m in window)
        record.baseline_tokens = count_tokens(prompt) + MESSAGE_OVERHEAD_TOKENS * (len(window) + 1)
        record.baseline_present = [name for name in record.needed if _fact(name).found_in(prompt)]


def _user_turns(records: Sequence[TurnRecord]) -> list[TurnRecord]:
    return [r for r in records if not r.text.startswith("LINK ") and r.text != "YES"]


def summarize(records: Sequence[TurnRecord]) -> dict[str, Any]:
    scored = [r for r in records if r.model_called]
    needed = sum(len(r.needed) for r in scored)
    return {
        "turns": len(records),
        "turns_with_model": len(scored),
        "sms_turns": sum(1 for r in records if r.channel == "sms"),
        "fact_checks": needed,
        "ours_present": sum(len(r.present) for r in scored),
        "baseline_present": sum(len(r.baseline_present) for r in scored),
        "ours_turns_complete": sum(1 for r in scored if len(r.present) == len(r.needed)),
        "baseline_turns_complete": sum(1 for r in scored if len(r.baseline_present) == len(r.needed)),
        "max_prompt_tokens": max((r.prompt_tokens for r in scored), default=0),
        "mean_prompt_tokens": round(sum(r.prompt_tokens for r in scored) / max(1, len(scored))),
        "p95_prompt_tokens": round(quantile([float(r.prompt_tokens) for r in scored], 95)) if scored else 0,
        "turns_over_budget": sum(1 for r in scored if r.prompt_tokens > TOKEN_BUDGET),
        "budget": TOKEN_BUDGET,
    }


def write_report(records: Sequence[TurnRecord], figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    scored = [r for r in records if r.model_called]
    x = [r.number for r in scored]
    share = [100 * len(r.present) / len(r.needed) if r.needed else 100 for r in scored]
    base = [100 * len(r.baseline_present) / len(r.needed) if r.needed else 100 for r in scored]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    top.plot(x, share, label="ours: summary + profile + agent_context + window", color="tab:green")
    top.plot(x, base, label="baseline: the seed's 15-message window", color="tab:red", alpha=0.8)
    top.set_ylabel("needed facts in the prompt (%)")
    top.set_ylim(-5, 105)
    top.legend(loc="lower left")
    bottom.plot(x, [r.prompt_tokens for r in scored], label="ours: prompt tokens", color="tab:green")
    bottom.plot(x, [r.baseline_tokens for r in scored], label="baseline: prompt tokens", color="tab:red", alpha=0.8)
    bottom.axhline(TOKEN_BUDGET, color="black", linestyle="--", label=f"budget ({TOKEN_BUDGET})")
    bottom.set_ylabel("estimated tokens")
    bottom.set_xlabel("turn")
    bottom.legend(loc="upper left")
    figure.suptitle("Memory fidelity over a scripted onboarding (local stack, Bedrock emulator)")
    figure.tight_layout()
    figure.savefig(out / "fidelity.png", dpi=110)
    plt.close(figure)
    (out / "fidelity.md").write_text(
        "# Memory fidelity evaluation\n\n"
        "Written by `uv run python -m infra.fidelity` (see its docstring for the method). A scripted client\n"
        "goes through the whole onboarding on the local stack (HTTP API, Twilio webhook and queue worker,\n"
        "moto's DynamoDB server, the Bedrock emulator through langchain-aws): it states facts early, answers\n"
        'the coach with small talk in between, says "start over" once, moves to SMS and back, and pauses\n'
        f"past the idle gap ({GAP_S} s in this run) once. For every turn, the prompt the model received is\n"
        "checked for every fact the current step needs; the baseline is the seed's window-only memory (the\n"
        "step prompt with nothing known, the last 15 messages, the message) on the same stored conversation.\n"
        "Tokens are this project's estimate (docs/decisions/0011-memory-beyond-the-window.md).\n\n"
        + "\n".join(table_rows(figures))
        + "\n\nFacts tracked (value, and the steps whose prompts need it):\n\n"
        + "\n".join(f'- {f.name}: "{f.value}" — {", ".join(sorted(f.needed_by))}' for f in FACTS)
        + "\n\n![needed facts in the prompt, and prompt size, per turn](fidelity.png)\n"
        + LIMITS_POINTER
    )
    (out / "fidelity.json").write_text(
        json.dumps({"figures": figures, "turns": [r.__dict__ for r in records]}, indent=1, ensure_ascii=False)
    )


def table_rows(figures: dict[str, Any]) -> list[str]:
    checks = figures["fact_checks"] or 1
    ours, base, turns = figures["ours_present"], figures["baseline_present"], figures["turns_with_model"]
    return [
        "| figure | ours | baseline (15-message window) |",
        "|---|---|---|",
        f"| turns (model called / all; by SMS) | {turns} / {figures['turns']}; {figures['sms_turns']} | same script |",
        f"| needed facts in the prompt | {ours} / {checks} ({100 * ours / checks:.1f} %) "
        f"| {base} / {checks} ({100 * base / checks:.1f} %) |",
        f"| turns whose prompt held every needed fact | {figures['ours_turns_complete']} / {turns} "
        f"| {figures['baseline_turns_complete']} / {turns} |",
        f"| prompt tokens, mean / max (budget {figures['budget']}) "
        f"| {figures['mean_prompt_tokens']} / {figures['max_prompt_tokens']} | |",
        f"| turns over the budget | {figures['turns_over_budget']} | |",
        "",
        "The threading design's success metrics (its goals; context retrieval p95 is in docs/benchmark.md):",
        "",
        "| metric | goal | measured | |",
        "|---|---|---|---|",
        *_success_rows(figures),
    ]


def _success_rows(figures: dict[str, Any]) -> list[str]:
    budget, turns = figures["budget"], figures["turns_with_model"] or 1
    mean, p95 = figures["mean_prompt_tokens"], figures["p95_prompt_tokens"]
    continuity = figures["ours_turns_complete"] / turns
    return [
        f"| token efficiency: prompt tokens against the budget ({budget}) | < 40 % | "
        f"mean {mean} ({100 * mean / budget:.1f} %), p95 {p95} ({100 * p95 / budget:.1f} %) "
        f"| {'met' if p95 < 0.4 * budget else '**missed**'} |",
        f"| conversation continuity: turns whose prompt held every fact the turn needs | every turn | "
        f"{figures['ours_turns_complete']} / {figures['turns_with_model']} ({100 * continuity:.1f} %) "
        f"| {'met' if continuity == 1 else '**missed**'} |",
    ]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one small-talk turn per answer (CI)")
    parser.add_argument(
        "--out", type=Path, default=local_folder(), help="where fidelity.md, .png, .json and .log go (default .local/)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print the log lines instead of writing them")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.environ.update({"CONVERSATION_GAP_S": str(GAP_S), "TOKEN_BUDGET": str(TOKEN_BUDGET), "RATE_LIMIT_MESSAGES": "0"})
    out: Path = args.out
    small_talk = 1 if args.quick else 11
    log_file = None if args.verbose else out / "fidelity.log"
    with logs_to(log_file) as console:
        with (
            tempfile.TemporaryDirectory() as scratch,
            LocalStack(data_file=Path(scratch) / "table.jsonl", api_port=0) as stack,
            Progress("fidelity", expected_turns(small_talk), "turns") as progress,
        ):
            client = run_script(stack, small_talk_per_answer=small_talk, progress=progress)
            score_baseline(client, build_repositories(Settings.from_env()))
        figures = summarize(client.records)
        write_report(client.records, figures, out)
        print("\n".join(table_rows(figures)), file=console)
        print(f"\nPlot and per-turn data: {out / 'fidelity.png'}, {out / 'fidelity.json'}", file=console)
        if log_file is not None:
            print(f"Log lines: {log_file} (-v prints them instead)", file=console)
    return 0 if figures["ours_present"] == figures["fact_checks"] and not figures["turns_over_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())

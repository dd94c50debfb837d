"""The local coach files what people say where it belongs: every phrase of the phrase set
(tests/support/data/coach_phrases.yaml) is sent at its question, with the product's own system
prompt and tools, and what the coach files (the save tool's items, the correct tool's item) is
compared with the items a careful person files it under.

Two figures: the share filed exactly right (every expected item and no other, each value holding
its words and not another item's), and the number misfiled (an item filed that the phrase does not
answer). Asking again instead of filing is not misfiling: when unsure, the coach asks.
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.local.bedrock_emulator.coach import coach_respond
from onboarding.llm.prompt import render_system_prompt
from onboarding.llm.tools import tool_definitions
from onboarding.llm.wording import STEP_PROMPTS
from onboarding.model.state import ONBOARDING_ORDER, OnboardingAgentType

pytestmark = pytest.mark.unit

DATA = Path(__file__).parents[1] / "support" / "data"
PHRASES = DATA / "coach_phrases.yaml"
UNSEEN = DATA / "coach_phrases_unseen.yaml"  # written after the reader, to see how it does on new answers
# Hedges, ranges, bare counts, health words, filler: written before the reader read them.
FRESH = DATA / "coach_phrases_fresh.yaml"
# Written by someone who read neither the reader nor its tests, measured once blind (81 of 100, 2
# misfiled), then taught from by kind of answer, so it is a set the reader knows (docs/local-development.md).
HOLDOUT = DATA / "coach_phrases_holdout.yaml"
# Written the same way after that, and never taught from: what the reader does on answers nobody
# tuned it on. Its floor sits just under its measurement (100 of 120, 2 misfiled), below the goal,
# and docs/local-development.md says so; a change that loses ground on it fails here.
BLIND = DATA / "coach_phrases_blind.yaml"
EXACT_GOAL = 0.95
KIND_FLOOR = 0.85
# Per set: the share it must file exactly right, the misfiled it may have, whether each kind of
# answer must reach KIND_FLOOR.
GOALS = {
    PHRASES: (EXACT_GOAL, 0, True),
    UNSEEN: (EXACT_GOAL, 0, True),
    FRESH: (EXACT_GOAL, 0, True),
    HOLDOUT: (EXACT_GOAL, 0, True),
    BLIND: (0.83, 2, False),
}
STEP_OF = {field.key: step for step in ONBOARDING_ORDER for field in STEP_PROMPTS[step].fields}
ORDER = list(STEP_OF)


@dataclass(frozen=True)
class Phrase:
    at: str
    kind: str
    say: str
    files: Mapping[str, str | None]


def _phrases(path: Path = PHRASES) -> tuple[dict[str, str], list[Phrase]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    phrases = [
        Phrase(
            at, entry["kind"], str(entry["say"]), {k: None if v is None else str(v) for k, v in entry["files"].items()}
        )
        for at, entries in data["at"].items()
        for entry in entries
    ]
    known = yaml.safe_load(PHRASES.read_text(encoding="utf-8"))["known"]
    return {key: str(value) for key, value in known.items()}, phrases


def product_tools(step: OnboardingAgentType) -> dict[str, Any]:
    """The step's tools as langchain-aws sends them to Bedrock (`toolConfig.tools[].toolSpec`)."""
    functions = [tool["function"] for tool in tool_definitions(step, False)]
    return {
        "tools": [
            {"toolSpec": {"name": f["name"], "description": f["description"], "inputSchema": {"json": f["parameters"]}}}
            for f in functions
        ]
    }


def filed(phrase: Phrase, known: Mapping[str, str]) -> dict[str, str]:
    """What the coach files when `phrase.say` answers the question of `phrase.at`, every item
    before it known: item -> value."""
    step = STEP_OF[phrase.at]
    context: dict[str, dict[str, str]] = {}
    for key in ORDER[: ORDER.index(phrase.at)]:
        context.setdefault(STEP_OF[key].value, {})[key] = known[key]
    system = render_system_prompt(step, context)
    question = next(f.question for f in STEP_PROMPTS[step].fields if f.key == phrase.at)
    messages = [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"text": question}]},
        {"role": "user", "content": [{"text": phrase.say}]},
    ]
    reply = coach_respond(system, messages, product_tools(step))
    found: dict[str, str] = {}
    for call in reply.tool_calls:
        if call.name.startswith("save_"):
            found |= {key: str(value) for key, value in call.input.items() if key != "step_complete"}
        elif call.name == "correct_answer":
            found[str(call.input["item"]).split(".", 1)[-1]] = str(call.input["value"])
    return found


def _holds(value: str, words: str) -> bool:
    return " ".join(words.casefold().split()) in " ".join(value.casefold().split())


def exactly_right(phrase: Phrase, found: Mapping[str, str]) -> bool:
    """The expected items and no other; each value holds its words, and no other item's words
    unless its own words hold them ("lose about 5 kg" may hold the target "5 kg")."""
    if set(found) != set(phrase.files):
        return False
    for item, words in phrase.files.items():
        if words is not None and not _holds(found[item], words):
            return False
        for other, other_words in phrase.files.items():
            own = words or ""
            if other != item and other_words and _holds(found[item], other_words) and not _holds(own, other_words):
                return False
    return True


@pytest.mark.parametrize("path", list(GOALS), ids=["phrases", "unseen", "fresh", "holdout", "blind"])
def test_the_phrase_set_is_filed_where_it_belongs(path: Path) -> None:
    exact_goal, misfiled_at_most, every_kind = GOALS[path]
    known, phrases = _phrases(path)
    assert len(phrases) >= (300 if path == PHRASES else 100)
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    misfiled: list[str] = []
    wrong: list[str] = []
    for phrase in phrases:
        found = filed(phrase, known)
        total[phrase.kind] += 1
        if exactly_right(phrase, found):
            right[phrase.kind] += 1
            continue
        extra = sorted(set(found) - set(phrase.files))
        line = f"at {phrase.at}: {phrase.say!r} -> {found} (expected {dict(phrase.files)})"
        (misfiled if extra else wrong).append(line)
    share = sum(right.values()) / len(phrases)
    report = "\n".join(
        [
            f"phrases: {len(phrases)}; exactly right: {sum(right.values())} ({share:.1%}); misfiled: {len(misfiled)}",
            *(f"  {kind}: {right[kind]}/{total[kind]}" for kind in sorted(total)),
            *(f"MISFILED {line}" for line in misfiled),
            *(f"not right {line}" for line in wrong),
        ]
    )
    print(report)
    assert len(misfiled) <= misfiled_at_most, report
    assert share >= exact_goal, report
    # No kind of answer is left behind (typos, several items at once, ...).
    if every_kind:
        assert all(right[kind] >= KIND_FLOOR * total[kind] for kind in total if total[kind] >= 10), report


# Small talk built of words answers use: a number, an app, a month, a diet someone else follows.
SMALL_TALK = (
    "message 3",
    "my friend is vegan",
    "my dad has diabetes",
    "I was born in March",
    "I work from home",
    "I waited 20 minutes for the bus",
    "the gym was closed today",
    "my phone app crashed",
    "I slept badly last night",
    "this is my first time using an app like this",
    "I love Christmas",
    "that's a lot of questions",
)


@pytest.mark.parametrize("said", SMALL_TALK)
def test_small_talk_is_filed_nowhere_at_any_question(said: str) -> None:
    known, _ = _phrases()
    misfiled = {at: found for at in ORDER if (found := filed(Phrase(at, "nothing", said, {}), known))}
    assert misfiled == {}


# What the memory benchmark's synthetic client says, which the phrase sets lacked: a symptom of a body
# part, and a correction that names its item around an answer no pattern of that item reads.
BENCHMARK_SAYINGS = (
    ("limitations", "my knee clicks when I run", {"limitations": "knee clicks"}),
    ("equipment", "Actually my main goal is now a half marathon", {"primary_goal": "half marathon"}),
)


@pytest.mark.parametrize(("at", "said", "files"), BENCHMARK_SAYINGS)
def test_what_the_benchmarks_client_says_is_filed_where_it_belongs(at: str, said: str, files: dict[str, str]) -> None:
    known, _ = _phrases()
    phrase = Phrase(at, "benchmark", said, files)
    found = filed(phrase, known)
    assert exactly_right(phrase, found), found

"""What the scripted coach says about its memory: the name it uses, recaps, corrections, the history
of an answer and answers from the saved plan, all read from the request it was sent.

Nothing here remembers anything between requests: a value the coach says is a value the prompt (the
system prompt's `Already known`, `About the client` and `Address the client as` lines) or a tool
result in the conversation holds. So a memory that lost something shows as a coach that says so.

The coach finds which answer a message is about by shared words with the answer's name, what the
correction tool says the item is, and its current value (a stem is a word's first five letters:
"weigh" finds "weight"). That is a stand-in for a model's understanding, good enough for messages
that name what they talk about ("my weight", "my training days").
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from infra.local.bedrock_emulator.stop_words import STOP_WORDS

_KNOWN_ITEM = re.compile(r"^- (?P<item>[a-z_]+\.[a-z_]+): (?P<value>.+?)(?: \((?:told|corrected) [^)]*\))?$")
_ADDRESS = re.compile(r"^Address the client as (?P<name>.+)\.$", re.MULTILINE)
_RETURNING = re.compile(r"^Returning client: ", re.MULTILINE)
_NEXT_QUESTION = re.compile(r"say what comes next: ask “(?P<question>[^”]+)”")
_STEP_TITLE = re.compile(r"^Current step: (?P<title>[^.]+)\.", re.MULTILINE)
NEXT_WHEN_COMPLETE = "What would you like to work on today?"
_ITEM_GLOSS = re.compile(r"(?P<item>[a-z_]+\.[a-z_]+) \((?P<about>[^)]*)\)")
_WORD = re.compile(r"[a-z0-9]+")

NAME_STATEMENT = re.compile(
    r"(?:\b(?:hi|hello|hey)\b[!,.]*\s*)?(?:\bplease,?\s+)?\b(?:my name is|call me|i(?:'|’)?m called|name's)\s+"
    r"[A-Za-z][\w'’-]*[,.!?]*",
    re.IGNORECASE,
)
# What joined the name to the rest ("beginner, and my name is Sam" -> "beginner").
_TRAILING_JOIN = re.compile(r"[\s,;-]+(?:and|but|also|btw)$", re.IGNORECASE)
RECAP_REQUEST = re.compile(
    r"\b(?:what do you know about me|what have i told you|summari[sz]e|recap|remind me what)\b", re.IGNORECASE
)
HISTORY_REQUEST = re.compile(
    r"\b(?:when i (?:started|began)|at the start|at first|originally|used to|before|earlier|first told|"
    r"how (?:has|have) .* changed|what did i (?:say|tell you|weigh))\b",
    re.IGNORECASE,
)
CORRECTION = re.compile(
    r"\b(?:actually|update|correction|changed?|change of plan|instead|no longer|anymore|switched|these days)\b",
    re.IGNORECASE,
)
# A remark beside the conversation ("By the way, my dog is called Biscuit"): never an answer.
SIDE_REMARK = re.compile(r"^\s*(?:by the way|btw|fun fact|unrelated|side note)\b", re.IGNORECASE)
# A first-person fact worth keeping (remember_fact kind "other").
LIFE_FACT = re.compile(
    r"\b(?:my (?:[a-z'’]+ ){0,2}(?:is|are|was|turned|started|loves|works|lives)\b|"
    r"i (?:work|live|moved|have a|have two|have three|got a|am a|'m a)\b)",
    re.IGNORECASE,
)


def stems(text: str) -> set[str]:
    """The words of `text` that carry meaning, each cut to its first five letters."""
    return {
        word[:5]
        for word in _WORD.findall(text.lower().replace("_", " "))
        if word not in STOP_WORDS and not word.isdigit()
    }


def _section(system: str, header: str) -> list[str]:
    lines = system.splitlines()
    for start, line in enumerate(lines):
        if line.startswith(header):
            return list(_until_blank(lines[start + 1 :]))
    return []


def _until_blank(lines: Iterable[str]) -> Iterable[str]:
    for line in lines:
        if not line.strip():
            return
        yield line


def known_items(system: str, with_notes: bool = False) -> dict[str, str]:
    """`step.field: value` of the system prompt's `Already known` (the day it was said left out;
    notes about an item the client could not answer, "(...)", only `with_notes`)."""
    found: dict[str, str] = {}
    for line in _section(system, "Already known"):
        if (match := _KNOWN_ITEM.match(line)) is not None and (with_notes or not match["value"].startswith("(")):
            found[match["item"]] = match["value"]
    return found


def about_the_client(system: str) -> list[str]:
    lines = [line.removeprefix("- ") for line in _section(system, "About the client") if line.startswith("- ")]
    return [line for line in lines if line != "nothing yet"]


def address_as(system: str) -> str | None:
    return match["name"] if (match := _ADDRESS.search(system)) is not None else None


def is_returning(system: str) -> bool:
    return _RETURNING.search(system) is not None


def returning_next_question(system: str) -> str | None:
    return match["question"] if (match := _NEXT_QUESTION.search(system)) is not None else None


def is_complete(system: str) -> bool:
    return "Onboarding is complete" in system


def item_descriptions(tool_config: Mapping[str, Any]) -> dict[str, str]:
    """What the correction tool says each item is (`step.field` -> a few words)."""
    for tool in tool_config.get("tools", []):
        spec = tool.get("toolSpec", {})
        if spec.get("name") == "correct_answer":
            item = spec.get("inputSchema", {}).get("json", {}).get("properties", {}).get("item", {})
            return {m["item"]: m["about"] for m in _ITEM_GLOSS.finditer(str(item.get("description", "")))}
    return {}


def items_about(text: str, candidates: Mapping[str, str], descriptions: Mapping[str, str]) -> list[str]:
    """The items `text` talks about, best first: those sharing the most words with the item's name,
    its description and `candidates`' value for it; [] when none shares a word."""
    said = stems(text)
    scores: dict[str, int] = {}
    for item in {*candidates, *descriptions}:
        words = stems(item.split(".", 1)[-1]) | stems(descriptions.get(item, "")) | stems(candidates.get(item, ""))
        if shared := len(said & words):
            scores[item] = shared
    best = max(scores.values(), default=0)
    order = [*candidates, *(item for item in descriptions if item not in candidates)]
    return [item for item in order if best and scores.get(item) == best]


def without_name_statements(text: str) -> str:
    """`text` without its sentences that give a name ("Call me Sam. I'm a beginner" -> the level)."""
    left = " ".join(NAME_STATEMENT.sub(" ", text).split()).strip(" ,;-")
    return _TRAILING_JOIN.sub("", left).strip(" ,;-")


def label(item: str) -> str:
    return item.split(".", 1)[-1].replace("_", " ")


_RECAP_VALUE_CHARS = 60


def _short(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= _RECAP_VALUE_CHARS else flat[: _RECAP_VALUE_CHARS - 1] + "…"


def recap(system: str, saved: Mapping[str, str] | None = None, names: bool = True) -> str:
    """What the prompt says is known about the client, in one line: each thing once (a profile
    line that repeats an answer is left out) and each value cut short (a pasted page stays out)."""
    known = {**{label(item): value for item, value in known_items(system).items()}, **(saved or {})}
    values = {" ".join(value.split()).casefold() for value in known.values()}
    parts: list[str] = []
    for line in about_the_client(system):
        name, _, value = line.partition(": ")
        if " ".join(value.split()).casefold() in values or name.casefold() in known:
            continue  # the answer below says it
        if not names and name.casefold() in ("name", "preferred name"):
            continue  # the greeting says it
        parts.append(f"{name}: {_short(value)}" if value else _short(line))
    parts += [f"{name}: {_short(value)}" for name, value in known.items()]
    if not parts:
        return "I don't have anything about you in my notes yet."
    return "Here's what I have: " + "; ".join(dict.fromkeys(parts)) + "."


def history_reply(payload: Mapping[str, Any]) -> str:
    """The answer_history tool's result, said back."""
    item = label(str(payload.get("item", "that")))
    if payload.get("never_answered"):
        return f"You haven't told me your {item} yet."
    earlier = [e for e in payload.get("earlier", []) if isinstance(e, Mapping)]
    now = f"Your {item} is now “{payload.get('current')}” (since {payload.get('current_since') or 'earlier'})"
    if not earlier:
        return now + "; it hasn't changed."
    said = "; ".join(f"“{e.get('value')}” (told {e.get('said') or 'earlier'})" for e in earlier)
    return f"{now}. Before that: {said}."


def plan_reply(text: str, system: str, descriptions: Mapping[str, str], question: bool) -> str:
    """After onboarding: answer from the saved plan what the message asks about."""
    known = known_items(system)
    about = items_about(text, known, descriptions)
    matched = [item for item in about if item in known][:3]
    if matched:
        return "From your plan: " + "; ".join(f"{label(item)}: {known[item]}" for item in matched) + "."
    if question:
        return "I don't have that in my notes: you haven't told me."
    pieces = [f"{label(item)}: {value}" for item, value in list(known.items())[:3]]
    plan = f" Your plan so far: {'; '.join(pieces)}." if pieces else ""
    return f"Noted.{plan} What would you like to work on next?"


_LAST_CLIENT_LINE = re.compile(r"^- Client(?: said)?: (?P<said>.*)$")
RESTART = re.compile(r"^\W*(?:start over|reset|new topic)\W*$", re.IGNORECASE)


def after_restart(system: str) -> bool:
    """The new conversation began because the client asked to start over (the last thing they said
    before it, in the summary), not after a gap: no "welcome back" seconds later."""
    said = [
        m["said"]
        for line in _section(system, "Summary of the earlier conversation")
        if (m := _LAST_CLIENT_LINE.match(line))
    ]
    return bool(said) and RESTART.match(said[-1]) is not None


def knows_anything(system: str) -> bool:
    return bool(known_items(system) or about_the_client(system))


def greeting(system: str) -> str:
    """By what is true: "Welcome back" after a gap, "Hi again" after a restart."""
    name = address_as(system)
    if after_restart(system):
        return f"Hi again, {name}!" if name else "Hi again!"
    return f"Welcome back, {name}!" if name else "Welcome back!"


def opening(system: str, next_up: str, complete: bool) -> str:
    """The first reply of a conversation: the introduction only to someone the coach knows nothing
    about; a returning client is greeted by what is true (with a recap after a gap); a client
    whose onboarding is under way goes on with it."""
    step = match["title"].lower() if (match := _STEP_TITLE.search(system)) else "onboarding"
    if not knows_anything(system):
        return f"Hi, I'm your coach! Let's start with your {step}. {next_up}"
    if is_returning(system) and not after_restart(system):
        follow = NEXT_WHEN_COMPLETE if complete else next_up
        return f"{greeting(system)} {recap(system, names=False)} {follow}"
    if is_returning(system):
        return f"{greeting(system)} Let's pick up your {step}. {'' if complete else next_up}".strip()
    return f"Hi! Let's carry on with your {step}. {'' if complete else next_up}".strip()


def with_name(system: str, text: str) -> str:
    """`text` addressed to the client by the name the prompt gives, if any."""
    name = address_as(system)
    if not name or name in text:
        return text
    if not text:
        return name
    keeps_capital = text.startswith(("I ", "I'", "I’")) or text[:2].isupper()
    return f"{name}, {text if keeps_capital else text[0].lower() + text[1:]}"


def quote_items(items: Sequence[str]) -> str:
    return ", ".join(label(item) for item in items)

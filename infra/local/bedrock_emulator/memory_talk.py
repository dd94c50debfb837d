"""What the scripted coach says about its memory: the name it uses, recaps, greetings, the history
of an answer, answers to "what's my name?" and "what's my goal?", and after onboarding the plan
and the next step, all read from the request it was sent.

Nothing here remembers anything between requests: a value the coach says is a value the prompt (the
system prompt's `Already known`, `About the client` and `Address the client as` lines) or a tool
result in the conversation holds. So a memory that lost something shows as a coach that says so.
"""

import re
from collections.abc import Iterable, Mapping
from itertools import takewhile
from typing import Any

from infra.local.bedrock_emulator import quantities, reading

_KNOWN_ITEM = re.compile(r"^- (?P<item>[a-z_]+\.[a-z_]+): (?P<value>.+?)(?: \((?:told|corrected) [^)]*\))?$")
_ADDRESS = re.compile(r"^Address the client as (?P<name>.+)\.$", re.MULTILINE)
_RETURNING = re.compile(r"^Returning client: ", re.MULTILINE)
_STEP_TITLE = re.compile(r"^Current step: (?P<title>[^.]+)\.", re.MULTILINE)
_ITEM_GLOSS = re.compile(r"(?P<item>[a-z_]+\.[a-z_]+) \((?P<about>[^)]*)\)")
_LAST_CLIENT_LINE = re.compile(r"^- Client(?: said)?: (?P<said>.*)$")
_RECAP_VALUE_CHARS = 60
NEXT_WHEN_COMPLETE = "What would you like to work on today?"

_TRAILING_JOIN = re.compile(r"[\s,;-]+(?:and|but|also|btw)$", re.IGNORECASE)
# Words that carry nothing in a written recap, each with what stands in its place: fillers of speech
# ("tbh", "um", "oh", a trailing "by the way"), "like" set off by commas or before an amount
# ("like 3 times a week"), and a leading "so", "well" or "and".
_FILLERS = tuple(
    (re.compile(pattern, re.IGNORECASE), instead)
    for pattern, instead in (
        (r"\b(?:tbh|to be honest|honestly|um+|uh+|erm+|er|lol|lmao|haha+|oh|ah|you know|by the way|btw)\b", " "),
        (r",\s*like\s*,", " "),
        (r"(?:^|(?<=[,.;!?]\s)|(?<=[,.;!?]))\s*like\s*(?:,\s*|(?=\d|maybe\b|a few\b|a couple\b|once\b|twice\b))", " "),
        (r"^\W*(?:so|well|ok|okay|yeah|yep|right|and|but)\b\s*,?\s*", ""),
    )
)
# Where a recap may shorten an answer: at the end of a clause, before the words that join the next.
_CLAUSE_END = re.compile(
    r"\s*[,.;!?]+\s*|\s+(?=(?:and|but|though|although|plus|also|so|because|which|while|or)\b)|\s*(?:—|–|\s-\s)\s*",
    re.IGNORECASE,
)
# What a whole answer or its first clauses may not end on: a word that joins the next clause.
_LOOSE_END = re.compile(r"(?:[\s,;:-]+(?:and|or|but|so|also|plus|then))+$", re.IGNORECASE)
# Words an answer cut between words may not end on: they lean on the words cut off.
_DANGLING = re.compile(
    r"(?:[\s,;:-]+(?:and|or|but|so|to|the|a|an|of|my|your|in|on|at|for|with|that|which|is|are|was|were|be"
    r"|i|i'm|because|when|if|than|then|as|from|by|about|very|really|just|want|like|also|plus|maybe))+$",
    re.IGNORECASE,
)
KINDS = reading.KINDS


def section(system: str, header: str) -> list[str]:
    """Lines of the block that starts with `header` and ends at a blank line."""
    lines = system.splitlines()
    start = next((index for index, line in enumerate(lines) if line.startswith(header)), len(lines))
    return list(takewhile(str.strip, lines[start + 1 :]))


def known_items(system: str, with_notes: bool = False) -> dict[str, str]:
    """`step.field: value` of the system prompt's `Already known` (the day it was said left out;
    notes about an item the client could not answer, "(...)", only `with_notes`)."""
    found: dict[str, str] = {}
    for line in section(system, "Already known"):
        if (match := _KNOWN_ITEM.match(line)) is not None and (with_notes or not match["value"].startswith("(")):
            found[match["item"]] = match["value"]
    return found


def about_the_client(system: str) -> list[str]:
    lines = [line.removeprefix("- ") for line in section(system, "About the client") if line.startswith("- ")]
    return [line for line in lines if line != "nothing yet"]


def address_as(system: str) -> str | None:
    return match["name"] if (match := _ADDRESS.search(system)) is not None else None


def is_returning(system: str) -> bool:
    return _RETURNING.search(system) is not None


def is_complete(system: str) -> bool:
    return "Onboarding is complete" in system


def item_descriptions(tool_config: Mapping[str, Any]) -> dict[str, str]:
    """What the correction tool says each item is (`step.field` -> a few words)."""
    for tool in tool_config.get("tools", []):
        spec = tool.get("toolSpec", {})
        if spec.get("name") == "correct_answer":
            item = spec.get("inputSchema", {}).get("json", {}).get("properties", {}).get("item", {})
            glosses = _ITEM_GLOSS.finditer(str(item.get("description", "")))
            return {m["item"]: m["about"] for m in glosses if m["item"].split(".")[1] in reading.ITEMS}
    return {}


def without_name_statements(text: str) -> str:
    """`text` without its sentences that give a name ("Call me Sam. I'm a beginner" -> the level)."""
    left = " ".join(KINDS["name_statement"].sub(" ", text).split()).strip(" ,;-")
    return _TRAILING_JOIN.sub("", left).strip(" ,;-")


def label(item: str) -> str:
    return item.split(".", 1)[-1].replace("_", " ")


def short(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= _RECAP_VALUE_CHARS else flat[: _RECAP_VALUE_CHARS - 1] + "…"


def gist(value: str) -> str:
    """An answer as a recap line says it: without filler words, whole when short, else its
    first clauses that fit (never cut inside a clause, never ending on a word that leans on the
    next); a first clause too long alone is cut between words, marked with "…"."""
    said = " ".join(value.split())
    for _ in range(3):  # a filler taken out may leave another at the start ("um like 3 times")
        for filler, instead in _FILLERS:
            said = " ".join(filler.sub(instead, said).split())
    said = re.sub(r"\s+([,.;!?])", r"\1", said).strip(" ,;:-")
    said = re.sub(r"([,;])(?:\s*[,;.])+", r"\1", said)
    said = _LOOSE_END.sub("", said.strip(" ,;:-.!")).strip(" ,;:-.!") or said.strip()
    if len(said) <= _RECAP_VALUE_CHARS:
        return said
    ends = [m.start() for m in _CLAUSE_END.finditer(said) if 0 < m.start() <= _RECAP_VALUE_CHARS]
    for end in reversed(ends):
        kept = _LOOSE_END.sub("", said[:end]).rstrip(" ,;:-")
        if kept:
            return kept
    cut = said[:_RECAP_VALUE_CHARS].rsplit(" ", 1)[0]
    return _DANGLING.sub("", cut).rstrip(" ,;:-") + "…"


def recap(system: str, saved: Mapping[str, str] | None = None, names: bool = True) -> str:
    """Everything the prompt says is known about the client, in one line: each thing once (a
    profile line that repeats an answer is left out) and each value as a person writes it down
    (its gist: whole, or its first clauses, without filler)."""
    known = {**{label(item): value for item, value in known_items(system).items()}, **(saved or {})}
    values = {" ".join(value.split()).casefold() for value in known.values()}
    parts: list[str] = []
    for line in about_the_client(system):
        name, _, value = line.partition(": ")
        if " ".join(value.split()).casefold() in values or name.casefold() in known:
            continue  # the answer below says it
        if not names and name.casefold() in ("name", "preferred name"):
            continue  # the greeting says it
        parts.append(f"{name}: {gist(value)}" if value else gist(line))
    parts += [f"{name}: {gist(value)}" for name, value in known.items()]
    if not parts:
        return "I don't have anything about you in my notes yet."
    return "Here's what I have: " + "; ".join(dict.fromkeys(parts)) + "."


def history_reply(payload: Mapping[str, Any], question: str = "") -> str:
    """The answer_history tool's result, said back; of the body answer, only the part the
    `question` asks about ("what did I weigh when I started?": each weight, no age)."""
    item = label(str(payload.get("item", "that")))
    if payload.get("never_answered"):
        return f"You haven't told me your {item} yet."
    earlier = [e for e in payload.get("earlier", []) if isinstance(e, Mapping)]
    kind = quantities.kind_asked(question) if item == "age and body" else None
    if kind is not None:
        return _part_history(kind, payload, earlier)
    now = f"Your {item} is now “{payload.get('current')}” (since {payload.get('current_since') or 'earlier'})"
    if not earlier:
        return now + "; it hasn't changed."
    said = "; ".join(f"“{e.get('value')}” (told {e.get('said') or 'earlier'})" for e in earlier)
    return f"{now}. Before that: {said}."


def _part_history(kind: str, payload: Mapping[str, Any], earlier: list[Mapping[str, Any]]) -> str:
    """The history of one part of the body answer: the values that say it, each change once."""
    told = [(quantities.part_of(kind, str(e.get("value", ""))), e.get("said") or "earlier") for e in earlier]
    told.append((quantities.part_of(kind, str(payload.get("current", ""))), payload.get("current_since") or "earlier"))
    changes: list[tuple[str, str]] = []
    for value, day in told:
        if value is not None and (not changes or changes[-1][0] != value):
            changes.append((value, str(day)))
    if not changes:
        return f"You haven't told me your {kind} yet."
    (value, day), before = changes[-1], changes[:-1]
    now = f"Your {kind} is now “{value}” (since {day})"
    if not before:
        return now + "; it hasn't changed."
    return f"{now}. Before that: {'; '.join(f'“{v}” (told {d})' for v, d in before)}."


def items_asked_about(question: str, system: str, items: Iterable[str]) -> list[str]:
    """The items (`step.field`) a question asks about: those it names ("my goal", "which days"),
    else those whose known value shares a word with it ("anything to watch for my knee?")."""
    by_field = {item.split(".", 1)[-1]: item for item in items}
    named = reading.named_items(question, list(by_field))
    if named:
        return [by_field[named[0]]]
    words = {w for w in re.findall(r"[a-z]{4,}", question.lower()) if w not in reading.SETS["question_words"]}
    known = known_items(system)
    return [item for item, value in known.items() if words & set(re.findall(r"[a-z]{4,}", value.lower()))]


def remembered(question: str, system: str, items: Iterable[str]) -> str | None:
    """The answer from memory to a question about what the client told ("what's my name?", "what's
    my goal?"); None when it asks about nothing an item or a fact holds."""
    if KINDS["name_question"].search(question):
        names = [line.partition(": ")[2] for line in about_the_client(system) if line.startswith("Name: ")]
        name = names[0] if names else address_as(system)
        return f"Your name is {name}." if name else "You haven't told me your name yet."
    known = known_items(system)
    asked = items_asked_about(question, system, [*known, *items])
    if asked:
        said = [f"{label(item)}: “{short(known[item])}”" for item in asked if item in known]
        missing = [label(item) for item in asked if item not in known]
        return (f"You told me your {'; '.join(said)}." if said else "") + (
            f" You haven't told me your {', '.join(missing)} yet." if missing else ""
        )
    words = {w for w in re.findall(r"[a-z]{4,}", question.lower()) if w not in reading.SETS["question_words"]}
    facts = [f for f in about_the_client(system) if words & set(re.findall(r"[a-z]{4,}", f.lower()))]
    return f"You told me: {'; '.join(short(f.removeprefix('Also: ')) for f in facts)}." if facts else None


def next_step(system: str) -> str:
    """After onboarding, the plain next step, from the saved plan."""
    plan = {label(item): gist(value) for item, value in known_items(system).items()}
    days = f" on your training days ({plan['training days']})" if "training days" in plan else ""
    check = f"; I'll check in as you asked ({plan['check ins']})" if "check ins" in plan else ""
    return f"Next step: start your first week of training{days}{check}."


def after_restart(system: str) -> bool:
    """The new conversation began because the client asked to start over (the last thing they said
    before it, in the summary), not after a gap: no "welcome back" seconds later."""
    said = [
        m["said"]
        for line in section(system, "Summary of the earlier conversation")
        if (m := _LAST_CLIENT_LINE.match(line))
    ]
    return bool(said) and KINDS["restart"].match(said[-1]) is not None


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
    if not (known_items(system) or about_the_client(system)):
        return f"Hi, I'm your coach! Let's start with your {step}. {next_up}"
    if is_returning(system) and not after_restart(system):
        follow = NEXT_WHEN_COMPLETE if complete else next_up
        return f"{greeting(system)} {recap(system, names=False)} {follow}"
    if complete:
        return f"{greeting(system) if is_returning(system) else 'Hi!'} {complete_plan(system)}"
    if is_returning(system):
        return f"{greeting(system)} Let's pick up your {step}. {next_up}"
    return f"Hi! Let's carry on with your {step}. {next_up}"


def complete_plan(system: str) -> str:
    """What a client who finished onboarding hears when they ask what now, or say hello: the next
    step, then everything saved."""
    return f"Your onboarding is complete. {next_step(system)} {recap(system, names=False)}"


def with_name(system: str, text: str) -> str:
    """`text` addressed to the client by the name the prompt gives, if any."""
    name = address_as(system)
    if not name or name in text:
        return text
    if not text:
        return name
    keeps_capital = text.startswith(("I ", "I'", "I’")) or text[:2].isupper()
    return f"{name}, {text if keeps_capital else text[0].lower() + text[1:]}"

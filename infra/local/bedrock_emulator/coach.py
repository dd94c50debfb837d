"""A deterministic scripted coach, so the local stack shows memory working (or failing) visibly.

It reads what a real model would: the system prompt (the `Collect` list of `- field: question`
lines, `Already known`, `About the client`, `Returning client`, the summary), the conversation and
the tools the request offers. It remembers nothing itself, so a coach that lost its memory re-asks,
and one that kept it moves on. Everything is a pure function of the request, so tests assert exact
replies (docs/decisions/0024-local-coach.md).

With tools (`toolConfig`) it acts as the app's prompt tells a model to: it reads the client's
message (reading.py), saves what it answers with `save_<step>` (several items in one call), files
an answer to an item of another step, or a change to a known one, with `correct_answer`, keeps a
name or a fact with `remember_fact`, parks an evasive answer with `ask_for` and looks an answer's
history up with `answer_history`; once the tools answered, it says what was kept, once, and asks
what comes next (memory_talk.py says what the memory holds). Without tools (a turn whose memory
could not be read) it answers in text. A request whose system prompt starts with `You keep a
running summary` is a summarization, answered with the updated summary.
"""

import contextlib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.local.bedrock_emulator import memory_talk as talk
from infra.local.bedrock_emulator import quantities, reading
from infra.local.bedrock_emulator.rules import message_text
from onboarding.llm.wording import CHECK_IN_OPENING

SUMMARY_PROMPT_PREFIX = "You keep a running summary"
_SUMMARY_NONE = "(none)"
_FIELD_LINE = re.compile(r"^- (?P<key>[a-z_]+): (?P<question>.+\?)\s*$")
_STEP_LINE = re.compile(r"^Current step: (?P<title>[^.]+)\.", re.MULTILINE)
_WAITING_LINE = re.compile(r"^Waiting for: (?P<key>[a-z_]+)\s*$", re.MULTILINE)
_NAMES = (
    ("name", re.compile(r"\bmy name is ([A-Za-z][\w'’-]*)", re.IGNORECASE)),
    ("preferred_name", re.compile(r"\bcall me ([A-Za-z][\w'’-]*)", re.IGNORECASE)),
)

Planned = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True)
class ToolCall:
    tool_use_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class CoachReply:
    """One assistant message: optional text, then the tool calls (stop reason `tool_use` if any)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Tools:
    """What the request's `toolConfig` offers: tool names, each save tool's fields (with the
    question that describes each), every item the correction tool lists, the fact kinds."""

    names: frozenset[str] = frozenset()
    save: Mapping[str, str] = field(default_factory=dict)  # field -> its save tool
    questions: Mapping[str, str] = field(default_factory=dict)  # field -> its question
    items: Mapping[str, str] = field(default_factory=dict)  # step.field -> what it is
    fact_kinds: frozenset[str] | None = None

    @classmethod
    def offered(cls, tool_config: Mapping[str, Any] | None) -> "Tools":
        names: set[str] = set()
        save: dict[str, str] = {}
        questions: dict[str, str] = {}
        kinds: frozenset[str] | None = None
        for tool in (tool_config or {}).get("tools", []):
            spec = tool.get("toolSpec", {})
            name = str(spec.get("name", ""))
            properties: Mapping[str, Any] = spec.get("inputSchema", {}).get("json", {}).get("properties", {})
            names.add(name)
            if name.startswith("save_"):
                for key, prop in properties.items():
                    if key != "step_complete":
                        save[key] = name
                        questions[key] = str(prop.get("description", ""))
            elif name == "remember_fact" and (enum := properties.get("kind", {}).get("enum")):
                kinds = frozenset(enum)
        return cls(frozenset(names), save, questions, talk.item_descriptions(tool_config or {}), kinds)


class Request:
    """One Converse request as the coach reads it: the step's items and questions, what is known
    (the prompt's and this turn's saves), the item just asked, the client's newest words."""

    def __init__(self, system: str, messages: Sequence[Mapping[str, Any]], tools: Tools) -> None:
        self.system, self.messages, self.tools = system, messages, tools
        collect = talk.section(system, "Collect")
        self.fields = [(m["key"], m["question"]) for line in collect if (m := _FIELD_LINE.match(line))]
        self.questions = {**{k: q for k, q in tools.questions.items() if q}, **dict(self.fields)}
        self.saved = _saved_values(messages)
        self.known_items = talk.known_items(system, with_notes=True)
        self.known = {item.split(".", 1)[1]: value for item, value in self.known_items.items()} | self.saved
        self.complete = talk.is_complete(system)
        self.step = m["title"] if (m := _STEP_LINE.search(system)) else "onboarding"
        last_text = max((i for i, m in enumerate(messages) if m.get("role") == "user" and _texts(m)), default=0)
        self.said = _texts(messages[last_text])[-1] if messages and _texts(messages[last_text]) else ""
        self.asked = self._asked(last_text)

    def _asked(self, index: int) -> str | None:
        """The item the client's message answers: the question the assistant message before it
        asked (the latest one in it), else the prompt's `Waiting for:` item (a trimmed history)."""
        if index >= 1 and self.messages[index - 1].get("role") == "assistant":
            asked = message_text(self.messages[index - 1])
            positions = {k: asked.rfind(q) for k, q in self.questions.items() if q and q in asked}
            if positions:
                return max(positions, key=lambda key: positions[key])
        waiting = _WAITING_LINE.search(self.system)
        return waiting["key"] if waiting else None

    @property
    def first(self) -> bool:
        """The conversation opens now (a window that kept no reply of an ongoing one does not)."""
        ongoing = talk.section(self.system, "Summary of the earlier") and not talk.is_returning(self.system)
        return not ongoing and not any(message.get("role") == "assistant" for message in self.messages)

    def open_items(self) -> list[str]:
        """Items still to answer: this step's, then any other step's the correction tool lists."""
        others = [item.split(".", 1)[1] for item in self.tools.items]
        return [key for key in dict.fromkeys([k for k, _ in self.fields] + others) if key not in self.known]

    def next_question(self) -> str:
        """The question just asked while it is open, else the step's first open one."""
        if self.asked in self.questions and self.asked not in self.known:
            return self.questions[self.asked]
        open_questions = [q for k, q in self.fields if k not in self.known]
        if open_questions:
            return open_questions[0]
        if self.fields:
            return f"That's everything I need for the {self.step.lower()} step, thank you!"
        return "What would you like to work on next?"

    def reply(self, text: str) -> CoachReply:
        return CoachReply(talk.with_name(self.system, text))


def coach_respond(
    system: str, messages: Sequence[Mapping[str, Any]], tool_config: Mapping[str, Any] | None = None
) -> CoachReply:
    """The scripted coach's reply to a (validated) Converse request: the updated summary, tool
    calls for what the client's message gives, or text (after tool results, or with no tool)."""
    if system.startswith(CHECK_IN_OPENING):
        return CoachReply(check_in(system))
    if system.startswith(SUMMARY_PROMPT_PREFIX):
        last_user = next((message for message in reversed(messages) if message.get("role") == "user"), None)
        return CoachReply(summarize(message_text(last_user) if last_user is not None else ""))
    request = Request(system, messages, Tools.offered(tool_config))
    last = messages[-1]
    if last.get("role") == "user" and any("toolResult" in block for block in last.get("content", [])):
        return _after_tool_results(request)
    planned = _plan(request) if last.get("role") == "user" else []
    if not planned:
        return request.reply(_in_words(request))
    calls = tuple(ToolCall(_tool_use_id(messages, i, name), name, given) for i, (name, given) in enumerate(planned))
    return CoachReply("", calls)  # the words come once, after the tools answered


def _not_an_answer(text: str) -> bool:
    return (
        not text
        or reading.is_question(text)
        or reading.is_request(text)
        or reading.says_nothing(text)
        or reading.is_acknowledgement(text)
        or (reading.is_yes_or_no(text) and not re.match(r"^\W*(?:no|nope|nah)\b", text, re.IGNORECASE))
    )


def _filed(request: Request, text: str) -> dict[str, str]:
    """What `text` answers, item -> value. A known item gets its corrected value, and none when
    the message only says it again ("the knee is my injury" of "I have a bad left knee"); an
    answer moved from the item it was filed under keeps its words there."""
    answer = talk.without_name_statements(text)
    if _not_an_answer(answer) or talk.KINDS["recap_request"].search(answer):
        return {}
    values = reading.read(answer, request.asked, request.open_items(), list(request.known))
    if reading.is_greeting(answer) and request.asked not in values:
        return {}  # "Morning!" is a greeting, unless the question was the time of day
    if "target" in values:  # "I'm 84 kg now, would love to get to 75": the target is 75 kg
        values["target"] = quantities.target_in_units(values["target"], answer)
    replaced = [request.known[key] for key in values if key in request.known]
    filed: dict[str, str] = {}
    for key, value in values.items():
        old = request.known.get(key)
        new = value if old is None else reading.corrected_value(key, old, value)
        if old is not None and _words(new) and _words(new) <= _words(old):
            continue
        filed[key] = next((was for was in replaced if was != old and _words(new) <= _words(was)), new)
    return filed


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{3,}|\d+", text.lower())) - {"the", "and", "not"}


def _plan(request: Request) -> list[Planned]:
    """The tool calls for the client's message: an answer history looked up, answers saved or
    corrected (each under its own item), a name or a fact kept, an evasive answer parked."""
    said, tools = request.said, request.tools
    if reading.is_question(said):
        if "answer_history" in tools.names and talk.KINDS["history_request"].search(said):
            about = talk.items_asked_about(said, request.system, [*request.known_items, *tools.items])
            return [("answer_history", {"item": about[0]})] if about else []
        return []
    planned: list[Planned] = []
    # A message the coach never answered (a reply cut short) is read first, as the answer it may be.
    for text in [*_unanswered(request.messages[-1]), said]:
        if not any(name.startswith("save_") for name, _ in planned):
            planned += _filing_calls(request, _filed(request, text))
    if not planned and request.asked and reading.KINDS["evasive"].search(said) and "ask_for" in tools.names:
        planned.append(("ask_for", {"field": request.asked}))
    if "remember_fact" in tools.names:
        planned += _facts(request, said, other=not planned)
    return planned


def _filing_calls(request: Request, values: Mapping[str, str]) -> list[Planned]:
    """Answers of this step in one save call; an answer of another step, or a change to a known
    answer, with correct_answer (the one tool that writes any step's item)."""
    tools = request.tools
    by_field = {item.split(".", 1)[1]: item for item in [*tools.items, *request.known_items]}
    saves: dict[str, dict[str, Any]] = {}
    corrections: list[Planned] = []
    for key, value in values.items():
        if key in tools.save and key not in request.known and not request.complete:
            saves.setdefault(tools.save[key], {})[key] = value
        elif key in by_field and "correct_answer" in tools.names:
            corrections.append(("correct_answer", {"item": by_field[key], "value": value}))
    calls: list[Planned] = []
    for name, given in saves.items():
        fields = [key for key, tool in tools.save.items() if tool == name]
        calls.append((name, {**given, "step_complete": all(k in request.known or k in given for k in fields)}))
    return calls + corrections


def _facts(request: Request, text: str, other: bool) -> list[Planned]:
    """remember_fact calls: a name given; with `other`, a first-person fact no item holds."""
    kinds = request.tools.fact_kinds
    calls: list[Planned] = [
        ("remember_fact", {"kind": kind, "value": m[1]})
        for kind, pattern in _NAMES
        if (kinds is None or kind in kinds) and (m := pattern.search(text)) is not None
    ]
    answer = talk.without_name_statements(text)
    fact = talk.KINDS["life_fact"].search(answer) and not _not_an_answer(answer)
    if other and fact and not calls and not request.complete and (kinds is None or "other" in kinds):
        calls.append(("remember_fact", {"kind": "other", "value": text}))
    return calls


def _in_words(request: Request) -> str:
    """A reply that needs no tool: an opening, a greeting, an answer from memory, a recap, the
    plan after onboarding, or a message that answers nothing asked; then the open question."""
    said, system, next_up = request.said, request.system, request.next_question()
    complete = request.complete
    if talk.KINDS["recap_request"].search(said):
        return f"{talk.recap(system, _labelled(request.saved))} {'' if complete else next_up}".strip()
    if request.first:
        return talk.opening(system, next_up, complete)
    if complete:
        return _after_onboarding(request)
    subject = talk.label(request.asked) if request.asked else "answer"
    if reading.is_greeting(said) or reading.says_nothing(said) or reading.is_acknowledgement(said):
        name = talk.address_as(system)
        lead = (f"Hi again, {name}!" if name else "Hi again!") if reading.is_greeting(said) else "Great."
    elif talk.KINDS["next_request"].search(said):
        lead = f"Next up, your {talk.label(request.asked or 'onboarding')}:"
    elif reading.is_question(said) and (known := talk.remembered(said, system, request.tools.items)):
        lead = known
    elif reading.is_question(said) or reading.is_request(said):
        lead = "Good question — here I can only help with your onboarding, so let's keep going."
    elif reading.is_yes_or_no(said):
        lead = f"I need a little more than “{talk.short(said)}” for your {subject}."
    else:
        lead = f"Sorry, I didn't catch your {subject} in that."
    return f"{lead} {next_up}"


def _after_onboarding(request: Request) -> str:
    """After onboarding: what the plan says about what the client asks, else the next step and
    everything saved."""
    said, system = request.said, request.system
    asked = talk.items_asked_about(said, system, talk.known_items(system))
    if reading.is_question(said) and asked and not talk.KINDS["next_request"].search(said):
        known = talk.known_items(system)
        return "From your plan: " + "; ".join(f"{talk.label(item)}: {known[item]}" for item in asked) + "."
    if reading.is_question(said) and not talk.KINDS["next_request"].search(said):
        return talk.remembered(said, system, ()) or "I don't have that in my notes: you haven't told me."
    return talk.complete_plan(system)


def _after_tool_results(request: Request) -> CoachReply:
    """The reply once the tools answered: one acknowledgement, what a correction or a look-up
    found, then what comes next. The system prompt was rebuilt after the tools ran, so a name
    just given and an answer just saved are already in it."""
    messages = request.messages
    payloads = _result_payloads(messages[-1])
    calls = {str(use.get("toolUseId")): use for use in _tool_uses(messages[-2])} if len(messages) >= 2 else {}
    outcomes = _outcomes(calls, payloads, request.said)
    parts = [part for part in [_acknowledgement(calls, payloads, _renamed(request)), *outcomes] if part]
    if any(payload.get("onboarding_complete") is True for _, payload in payloads):
        recap = talk.recap(request.system, _labelled(request.saved))
        parts.append(f"That's everything — your onboarding is complete! {recap}")
        return request.reply(" ".join(parts))
    next_question = next((p["next_question"] for _, p in payloads if isinstance(p.get("next_question"), str)), None)
    asked_for = [str(c["input"].get("field", "")) for c in calls.values() if c.get("name") == "ask_for"]
    if next_question:
        parts.append(f"That step is done. {next_question}")
    elif asked_for:
        question = request.questions.get(asked_for[0], talk.label(asked_for[0]))
        parts.append(f"No problem — when you know, just tell me: {question}")
    elif request.complete:
        if not outcomes:
            parts.append(_after_onboarding(request))
    else:
        parts.append(request.next_question())
    return request.reply(" ".join(parts))


def _renamed(request: Request) -> bool:
    """The client already went by a name before their newest message (given in an earlier message
    or the summary of the conversation, or kept by an earlier remember_fact call), or their
    message says the name changes ("call me Sammy actually"): a name given now renames them."""
    messages = request.messages
    newest = max((i for i, m in enumerate(messages) if m.get("role") == "user" and _texts(m)), default=0)
    earlier = [text for m in messages[:newest] if m.get("role") == "user" for text in _texts(m)]
    earlier += talk.section(request.system, "Summary of the earlier")
    kept = [
        use.get("input", {})
        for m in messages[:newest]
        if m.get("role") == "assistant"
        for use in _tool_uses(m)
        if use.get("name") == "remember_fact"
    ]
    return (
        any(isinstance(given, Mapping) and given.get("kind") in ("name", "preferred_name") for given in kept)
        or any(pattern.search(text) for text in earlier for _, pattern in _NAMES)
        or (
            reading.KINDS["correction"].search(request.said) is not None
            and any(p.search(request.said) for _, p in _NAMES)
        )
    )


def _labelled(values: Mapping[str, str]) -> dict[str, str]:
    return {key.replace("_", " "): value for key, value in values.items()}


def _texts(message: Mapping[str, Any]) -> list[str]:
    return [str(block["text"]).strip() for block in message.get("content", []) if "text" in block]


def _unanswered(message: Mapping[str, Any]) -> list[str]:
    """The earlier text blocks of the last user message: messages the coach never answered (the
    app merges them into the next user message as separate blocks, never one glued string)."""
    return [text for text in _texts(message)[:-1] if text]


def _tool_uses(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [block["toolUse"] for block in message.get("content", []) if "toolUse" in block]


def _saved_values(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Field values that save and correct calls in this conversation stored (the newest wins)."""
    values: dict[str, str] = {}
    for message in messages:
        for use in _tool_uses(message) if message.get("role") == "assistant" else []:
            given = use.get("input")
            if not isinstance(given, Mapping):
                continue
            if str(use.get("name", "")).startswith("save_"):
                values |= {k: v for k, v in given.items() if k != "step_complete" and isinstance(v, str) and v.strip()}
            elif use.get("name") == "correct_answer":
                values[str(given.get("item", "")).split(".", 1)[-1]] = str(given.get("value", ""))
    return values


def _tool_use_id(messages: Sequence[Mapping[str, Any]], position: int, name: str) -> str:
    """A Bedrock-shaped id (`tooluse_` + 22 characters), derived from the request so replies are
    deterministic, and different for every position in every conversation."""
    digest = hashlib.sha256(json.dumps([messages, position, name], sort_keys=True, default=str).encode()).hexdigest()
    return f"tooluse_{digest[:22]}"


def _result_payloads(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(toolUseId, JSON object) for each toolResult: its `json` block, or its text read as JSON."""
    payloads: list[tuple[str, dict[str, Any]]] = []
    for result in (block["toolResult"] for block in message.get("content", []) if "toolResult" in block):
        payload: dict[str, Any] = {}
        for item in result.get("content", []):
            with contextlib.suppress(ValueError):
                found = item["json"] if "json" in item else json.loads(str(item.get("text")))
                payload.update(found if isinstance(found, dict) else {})
        payloads.append((str(result.get("toolUseId", "")), payload))
    return payloads


def _outcomes(
    calls: Mapping[str, Mapping[str, Any]], payloads: list[tuple[str, dict[str, Any]]], question: str
) -> list[str]:
    """What changes to known answers and history look-ups came back with, said to the client (a
    history by the part of the answer the `question` asks about: "what did I weigh?")."""
    parts: list[str] = []
    for _, payload in payloads:
        if isinstance(payload.get("corrected"), str) and payload.get("previous"):
            was, value = talk.short(str(payload["previous"])), talk.short(str(payload.get("value")))
            parts.append(f"Updated your {talk.label(payload['corrected'])}: “{value}” (it was “{was}”).")
        elif isinstance(payload.get("item"), str) and ("earlier" in payload or payload.get("never_answered")):
            parts.append(talk.history_reply(payload, question))
    return parts


def _acknowledgement(
    calls: Mapping[str, Mapping[str, Any]], payloads: list[tuple[str, dict[str, Any]]], renamed: bool = False
) -> str:
    """One sentence for what this turn's tools kept: the answers saved (also those of another
    step), a name (met once: for a client `renamed`, known by a name already, "Sammy it is!"),
    a fact."""
    saved: list[str] = []
    said: list[str] = []
    facts = False
    for tool_use_id, payload in payloads:
        call = calls.get(tool_use_id)
        given = call.get("input") if call is not None else None
        if call is None or not isinstance(given, Mapping) or "error" in payload:
            continue
        name = str(call.get("name", ""))
        if name.startswith("save_"):
            saved += [f"{talk.label(k)}: “{talk.short(str(v))}”" for k, v in given.items() if isinstance(v, str)]
        elif name == "correct_answer" and not payload.get("previous") and "corrected" in payload:
            saved.append(f"{talk.label(str(given.get('item')))}: “{talk.short(str(given.get('value')))}”")
        elif name == "remember_fact" and given.get("kind") in ("name", "preferred_name"):
            said.append(f"{given.get('value')} it is!" if renamed else f"Nice to meet you, {given.get('value')}!")
        elif name == "remember_fact":
            facts = True
    if saved:
        said.append(f"Noted your {'; '.join(saved)}.")
    elif facts:
        said.append("Thanks for telling me, I'll remember that.")
    return " ".join(said)


def check_in(system: str) -> str:
    """A check-in that names what its prompt's memory holds: the first item of the plan, the
    limitation to mind, and the name to address (or a plain question when it holds none)."""
    name = next((line.split(":", 1)[1].strip() for line in system.splitlines() if line.startswith("Address as:")), "")
    plan = [line.split(": ", 1)[1] for line in talk.section(system, "Their plan:") if ": " in line]
    mind = [line.removeprefix("- ") for line in talk.section(system, "Limitation to mind:")]
    opening = f"Hi {name}, checking in" if name else "Checking in"
    named = [value for value in plan if any(c.isalpha() for c in value)]  # "kettlebells" before "3"
    about = f"how is it going with {named[0]}?" if named else "how has your week been?"
    care = f" Remember to go easy with {mind[0]}." if mind else ""
    return f"{opening}: {about}{care}"


def summarize(request_text: str) -> str:
    """The updated running summary: the current summary's lines, then `- Client said: …` for every
    Client message that is more than an acknowledgement (Coach lines are dropped)."""
    lines = request_text.splitlines()
    summary: list[str] = []
    entries: list[tuple[str, list[str]]] = []
    section = "new" if not any(line.strip() == "Current summary:" for line in lines) else "before"
    for line in lines:
        stripped = line.strip()
        if stripped == "Current summary:":
            section = "summary"
        elif stripped == "New messages:":
            section = "new"
        elif section == "summary":
            if stripped and stripped != _SUMMARY_NONE:
                summary.append(stripped)
        elif section == "new":
            speaker, colon, said = stripped.partition(":")
            if speaker in ("Client", "Coach") and colon:
                entries.append((speaker, [said.strip()]))
            elif stripped and entries:
                # A message that spans several lines continues its speaker's entry.
                entries[-1][1].append(stripped)
    for speaker, parts in entries:
        said = " ".join(part for part in parts if part)
        if speaker == "Client" and said and not reading.is_acknowledgement(said):
            summary.append(f"- Client said: {said}")
    return "\n".join(summary) if summary else _SUMMARY_NONE

"""The scripted coach's turns when the request offers tools (`toolConfig`), as the app's prompt
tells a model to use them: read the client's message (infra/local/bedrock_emulator/reading.py), then save
an answer with `save_<step>`, keep facts with `remember_fact`, park an evasive answer with
`ask_for`, change an earlier answer with `correct_answer` and look one up with `answer_history`;
once the tools answered, say it once, in text (docs/decisions/0024-local-coach.md).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.local.bedrock_emulator import memory_talk as talk
from infra.local.bedrock_emulator import reading
from infra.local.bedrock_emulator.coach import (
    _EVASIVE,
    _FACT_PATTERNS,
    _WAITING_LINE,
    CoachReply,
    ToolCall,
    Turn,
    _fields,
    _is_question,
    _known_values,
    _open_question_or_done,
    _quote,
    coach_reply,
)
from infra.local.bedrock_emulator.rules import message_text
from infra.local.bedrock_emulator.tool_messages import (
    _acknowledgement,
    _last_said,
    _result_payloads,
    _said_now,
    _saved_values,
    _tool_outcomes,
    _tool_use_id,
    _tool_uses,
    _unanswered,
)


@dataclass(frozen=True)
class _SaveTool:
    name: str
    # field key -> its description (the field's question text)
    fields: dict[str, str]


@dataclass(frozen=True)
class _Tools:
    save: tuple[_SaveTool, ...] = ()
    remember_kinds: frozenset[str] | None = None
    has_remember: bool = False
    has_ask_for: bool = False
    items: Mapping[str, str] = field(default_factory=dict)  # step.field -> what it is (correct_answer)
    has_correct: bool = False
    has_history: bool = False

    def save_tool_for(self, key: str) -> _SaveTool | None:
        return next((tool for tool in self.save if key in tool.fields), None)


def _tools(tool_config: Mapping[str, Any]) -> _Tools:
    save: list[_SaveTool] = []
    remember_kinds: frozenset[str] | None = None
    names: set[str] = set()
    for tool in tool_config.get("tools", []):
        spec = tool.get("toolSpec", {})
        name = str(spec.get("name", ""))
        properties: Mapping[str, Any] = spec.get("inputSchema", {}).get("json", {}).get("properties", {})
        names.add(name)
        if name.startswith("save_"):
            fields = {
                key: str(prop.get("description", "")) for key, prop in properties.items() if key != "step_complete"
            }
            save.append(_SaveTool(name, fields))
        elif name == "remember_fact":
            enum = properties.get("kind", {}).get("enum")
            remember_kinds = frozenset(enum) if enum else None
    return _Tools(
        save=tuple(save),
        remember_kinds=remember_kinds,
        has_remember="remember_fact" in names,
        has_ask_for="ask_for" in names,
        items=talk.item_descriptions(tool_config),
        has_correct="correct_answer" in names,
        has_history="answer_history" in names,
    )


def _questions(system: str, tools: _Tools) -> dict[str, str]:
    """Each field's question: the Collect list's, else the save tool's property description."""
    questions = dict(_fields(system))
    for tool in tools.save:
        for key, description in tool.fields.items():
            if description:
                questions.setdefault(key, description)
    return questions


def _answered_field(system: str, messages: Sequence[Mapping[str, Any]], questions: Mapping[str, str]) -> str | None:
    """The field the last user message answers: the question the previous assistant message asked
    (the latest one in it, if it holds several), else the prompt's `Waiting for:` field. The
    conversation goes first because it shows what was really asked; `Waiting for` covers a history
    that no longer holds the question (trimmed or summarized)."""
    if len(messages) >= 2 and messages[-2].get("role") == "assistant":
        asked = message_text(messages[-2])
        positions = {key: asked.rfind(question) for key, question in questions.items() if question in asked}
        if positions:
            return max(positions, key=lambda key: positions[key])
    waiting = _WAITING_LINE.search(system)
    return waiting["key"] if waiting else None


def _facts(text: str, tools: _Tools, other: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """remember_fact calls for what `text` says about the client; `other`: also a first-person
    fact that fits no profile field ("my daughter Emma started school")."""
    if not tools.has_remember:
        return []
    calls: list[tuple[str, dict[str, Any]]] = []
    for kind, pattern, group in _FACT_PATTERNS:
        if tools.remember_kinds is not None and kind not in tools.remember_kinds:
            continue
        if (match := pattern.search(text)) is not None:
            value = match[1] if group else match[0]
            if any(call_input == {"kind": kind, "value": value} for _, call_input in calls):
                continue
            calls.append(("remember_fact", {"kind": kind, "value": value}))
    kinds_allowed = tools.remember_kinds is None or "other" in tools.remember_kinds
    if other and not calls and kinds_allowed and talk.LIFE_FACT.search(text):
        calls.append(("remember_fact", {"kind": "other", "value": text}))
    return calls


def _after_tool_results(system: str, messages: Sequence[Mapping[str, Any]], tools: _Tools) -> CoachReply:
    """The reply once the tools answered: one acknowledgement, what a correction or a look-up
    found, then what comes next. `system` is the prompt rebuilt after the tools ran, so a name just
    given and an answer just saved are already in it."""
    payloads = _result_payloads(messages[-1])
    calls = {str(use.get("toolUseId")): use for use in _tool_uses(messages[-2])} if len(messages) >= 2 else {}
    parts = [part for part in [_acknowledgement(calls, payloads), *_tool_outcomes(payloads)] if part]
    saved = _saved_values(messages)  # in the rebuilt prompt too; said here for a prompt that is not
    if any(payload.get("onboarding_complete") is True for _, payload in payloads):
        recap = talk.recap(system, {key.replace("_", " "): value for key, value in saved.items()})
        parts.append(f"That's everything — your onboarding is complete! {recap}")
        return CoachReply(talk.with_name(system, " ".join(parts)))
    next_question = next(
        (p["next_question"] for _, p in payloads if isinstance(p.get("next_question"), str) and p["next_question"]),
        None,
    )
    questions = _questions(system, tools)
    asked_for = [
        str(call["input"].get("field", ""))
        for call in calls.values()
        if call.get("name") == "ask_for" and isinstance(call.get("input"), Mapping)
    ]
    if next_question is not None:
        parts.append(f"That step is done. {next_question}")
    elif asked_for:
        question = questions.get(asked_for[0], asked_for[0].replace("_", " "))
        parts.append(f"No problem — when you know, just tell me: {question}")
    elif talk.is_complete(system):
        if not _tool_outcomes(payloads):
            said = _last_said(messages)
            parts.append(talk.plan_reply(said, system, tools.items, _is_question(said)))
    else:
        parts.append(_open_question_or_done(system, set(_known_values(system)) | set(saved)))
    return CoachReply(talk.with_name(system, " ".join(parts)))


def _memory_calls(system: str, text: str, tools: _Tools) -> list[tuple[str, dict[str, Any]]]:
    """A question about how an answer changed looks it up; a message that changes a known answer
    corrects it: the item whose answers look like the message (else the one it shares most words
    with), and in a compound answer only the part the message gives."""
    known = talk.known_items(system)
    if _is_question(text):
        if tools.has_history and talk.HISTORY_REQUEST.search(text):
            about = talk.items_about(text, known, tools.items)
            return [("answer_history", {"item": about[0]})] if about else []
        return []
    if tools.has_correct and talk.CORRECTION.search(text):
        item = reading.best_known_item(text, known) or next(
            (i for i in talk.items_about(text, known, tools.items) if i in known), None
        )
        if item is not None:
            value = reading.corrected_value(item.split(".", 1)[-1], known[item], text)
            return [("correct_answer", {"item": item, "value": value})]
    return []


def _not_an_answer(text: str) -> bool:
    return (
        not text
        or _is_question(text)
        or reading.is_request(text)
        or reading.is_greeting(text)
        or reading.says_nothing(text)
        or talk.SIDE_REMARK.search(text) is not None
        or reading.is_acknowledgement(text)
    )


def _filed_under(system: str, messages: Sequence[Mapping[str, Any]], tools: _Tools, answer: str) -> str | None:
    """The open item of this step `answer` answers: the one just asked when it fits; else another
    open item whose answers look like it (an answer given out of order); else the asked one when
    any message answers it (an open question); else none."""
    questions = _questions(system, tools)
    known = set(_known_values(system)) | set(_saved_values(messages))
    open_items = [key for key, _ in _fields(system) if key not in known]
    asked = _answered_field(system, messages, questions)
    if asked is not None and reading.fits(asked, answer):
        return asked
    others = [key for key in open_items if key != asked]
    strict = [key for key in reading.items_it_answers(answer, others) if reading.SHAPES[key].strict]
    if strict:
        return strict[0]
    if asked is not None and reading.plausible(asked, questions.get(asked, ""), answer):
        return asked
    loose = reading.items_it_answers(answer, others)
    return loose[0] if loose else None


def _answer_calls(
    system: str, messages: Sequence[Mapping[str, Any]], tools: _Tools, answer: str
) -> list[tuple[str, dict[str, Any]]]:
    asked = _answered_field(system, messages, _questions(system, tools))
    if _EVASIVE.search(answer):  # puts the question off: wait for that item; it answers nothing
        return [("ask_for", {"field": asked})] if asked is not None and tools.has_ask_for else []
    field = _filed_under(system, messages, tools, answer)
    if field is None:
        return []
    save_tool = tools.save_tool_for(field)
    if save_tool is None:
        return []
    known = set(_known_values(system)) | set(_saved_values(messages)) | {field}
    return [(save_tool.name, {field: answer, "step_complete": all(key in known for key in save_tool.fields)})]


def _in_words(system: str, messages: Sequence[Mapping[str, Any]], tools: _Tools, said: str) -> str:
    """A reply that needs no tool: a greeting, a question or request, a recap, or a message that
    answers nothing asked; each says so plainly and asks the open question again."""
    first = not any(message.get("role") == "assistant" for message in messages)
    known = set(_known_values(system)) | set(_saved_values(messages))
    questions = _questions(system, tools)
    asked = _answered_field(system, messages, questions)
    # The question just asked, again, while it is open; else the first open one.
    next_up = questions[asked] if asked in questions and asked not in known else _open_question_or_done(system, known)
    complete = talk.is_complete(system)
    if first and not talk.RECAP_REQUEST.search(said):
        return talk.with_name(system, talk.opening(system, next_up, complete))
    if talk.RECAP_REQUEST.search(said):
        return talk.with_name(system, f"{talk.recap(system)} {'' if complete else next_up}".strip())
    if complete:
        return talk.with_name(system, talk.plan_reply(said, system, tools.items, _is_question(said)))
    label = asked.replace("_", " ") if asked else "answer"
    if reading.is_greeting(said) or reading.says_nothing(said) or reading.is_acknowledgement(said):
        name = talk.address_as(system)
        lead = (f"Hi again, {name}!" if name else "Hi again!") if reading.is_greeting(said) else "Great."
    elif _is_question(said) or reading.is_request(said):
        lead = "Good question — here I can only help with your onboarding, so let's keep going."
    elif reading.is_yes_or_no(said):
        lead = f"I need a little more than “{_quote(said)}” for your {label}."
    else:
        lead = f"Sorry, that doesn't sound like your {label}."
    return talk.with_name(system, f"{lead} {next_up}")


def _tool_turn(system: str, messages: Sequence[Mapping[str, Any]], tools: _Tools) -> CoachReply:
    last = messages[-1]
    conversation = [Turn(str(message["role"]), message_text(message)) for message in messages]
    if last.get("role") != "user":
        # An assistant prefill to continue: nothing was said to act on.
        return CoachReply(coach_reply(system, conversation, frozenset(_saved_values(messages)), tools.items))
    if any("toolResult" in block for block in last.get("content", [])):
        # Answering tool results: text only, as the app expects before the client's next message.
        return _after_tool_results(system, messages, tools)
    text = _said_now(last)
    planned = _memory_calls(system, text, tools)
    # A name given ("call me Sam") is a fact about the client, never the answer to the question
    # asked; nor is a greeting, a question, a request, an aside or a bare "ok".
    answer = talk.without_name_statements(text)
    if not planned and not talk.RECAP_REQUEST.search(text) and not talk.is_complete(system):
        # A message the coach never answered (cut short) is read as the answer it may be, first.
        for earlier in _unanswered(last):
            if not _not_an_answer(earlier) and not planned:
                planned += _answer_calls(system, messages, tools, earlier)
        if not _not_an_answer(answer) and not any(name.startswith("save_") for name, _ in planned):
            planned += _answer_calls(system, messages, tools, answer)
    planned += _facts(text, tools, other=not planned and not _not_an_answer(answer) and not talk.is_complete(system))
    filed = None if _not_an_answer(answer) or _EVASIVE.search(answer) else _filed_under(system, messages, tools, answer)
    if not planned and filed is not None:
        # An answer with no tool to save it (a request that offers none): the text-only coach.
        return CoachReply(coach_reply(system, conversation, frozenset(_saved_values(messages)), tools.items))
    if not planned:
        return CoachReply(_in_words(system, messages, tools, text))
    calls = tuple(
        ToolCall(_tool_use_id(messages, position, name), name, call_input)
        for position, (name, call_input) in enumerate(planned)
    )
    return CoachReply("", calls)  # the words come once, after the tools answered

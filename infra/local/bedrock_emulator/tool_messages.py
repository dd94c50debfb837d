"""What a conversation's tool calls and results hold, for the scripted coach's tool turns
(infra/local/bedrock_emulator/tool_turns.py): the values saved so far, the results that came back,
the client's last words beside them, and one sentence for what the tools did."""

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from infra.local.bedrock_emulator import memory_talk as talk
from infra.local.bedrock_emulator.coach import _quote


def _tool_uses(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [block["toolUse"] for block in message.get("content", []) if "toolUse" in block]


def _saved_values(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Field values that earlier save_* calls in this conversation stored (the newest wins)."""
    values: dict[str, str] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for tool_use in _tool_uses(message):
            given = tool_use.get("input")
            if str(tool_use.get("name", "")).startswith("save_") and isinstance(given, Mapping):
                for key, value in given.items():
                    if key != "step_complete" and isinstance(value, str) and value.strip():
                        values[key] = value
            elif tool_use.get("name") == "correct_answer" and isinstance(given, Mapping):
                values[str(given.get("item", "")).split(".", 1)[-1]] = str(given.get("value", ""))
    return values


def _tool_use_id(messages: Sequence[Mapping[str, Any]], position: int, name: str) -> str:
    """A Bedrock-shaped id (`tooluse_` + 22 characters), derived from the request so replies are
    deterministic, and different for every position in every conversation."""
    digest = hashlib.sha256(
        json.dumps([messages, position, name], sort_keys=True, default=str).encode("utf-8")
    ).hexdigest()
    return f"tooluse_{digest[:22]}"


def _result_payloads(message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(toolUseId, JSON object) for each toolResult whose content is, or holds, a JSON object."""
    payloads: list[tuple[str, dict[str, Any]]] = []
    for block in message.get("content", []):
        if "toolResult" not in block:
            continue
        result = block["toolResult"]
        payload: dict[str, Any] = {}
        for item in result.get("content", []):
            if isinstance(item.get("json"), Mapping):
                payload.update(item["json"])
            elif isinstance(item.get("text"), str):
                try:
                    parsed = json.loads(item["text"])
                except ValueError:
                    continue
                if isinstance(parsed, dict):
                    payload.update(parsed)
        payloads.append((str(result.get("toolUseId", "")), payload))
    return payloads


def _last_said(messages: Sequence[Mapping[str, Any]]) -> str:
    """The client's last words (tool results are user messages without text)."""
    return next((text for m in reversed(messages) if m.get("role") == "user" and (text := _said_now(m))), "")


def _said_now(message: Mapping[str, Any]) -> str:
    """The newest text of a user message. The app merges messages that got no answer (a reply cut
    short by Ctrl-C) into the next user message as separate text blocks; each is a message of its
    own, never glued to the next ("vegetarian" + "Hi" is not "vegetarian Hi")."""
    texts = [str(block["text"]) for block in message.get("content", []) if "text" in block]
    return texts[-1].strip() if texts else ""


def _unanswered(message: Mapping[str, Any]) -> list[str]:
    """The earlier text blocks of the last user message: messages the coach never answered."""
    texts = [str(block["text"]).strip() for block in message.get("content", []) if "text" in block]
    return [text for text in texts[:-1] if text]


def _tool_outcomes(payloads: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What corrections and history look-ups came back with, said to the client."""
    parts: list[str] = []
    for _, payload in payloads:
        if isinstance(payload.get("corrected"), str):
            was = f" (it was “{_quote(str(payload['previous']))}”)" if payload.get("previous") else ""
            parts.append(
                f"Updated your {talk.label(payload['corrected'])}: “{_quote(str(payload.get('value')))}”{was}."
            )
        elif isinstance(payload.get("item"), str) and ("earlier" in payload or payload.get("never_answered")):
            parts.append(talk.history_reply(payload))
    return parts


def _acknowledgement(calls: Mapping[str, Mapping[str, Any]], payloads: list[tuple[str, dict[str, Any]]]) -> str:
    """One sentence for what this turn's tools kept: the answers saved, a name, a fact."""
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
            saved += [
                f"{key.replace('_', ' ')}: “{_quote(str(value))}”"
                for key, value in given.items()
                if key != "step_complete" and isinstance(value, str)
            ]
        elif name == "remember_fact" and given.get("kind") in ("name", "preferred_name"):
            said.append(f"Nice to meet you, {given.get('value')}!")
        elif name == "remember_fact":
            facts = True
    if saved:
        said.append(f"Noted your {'; '.join(saved)}.")
    elif facts:
        said.append("Thanks for telling me, I'll remember that.")
    return " ".join(said)

"""The request checks Bedrock's Converse API applies (for Anthropic models), with its wording.

Where Bedrock's wording is known (AWS docs, or error messages quoted in public bug reports) it is
used word for word, so code that matches on it behaves the same against the emulator. The few
checks marked "emulator wording" have no known Bedrock message; they still answer 400.
"""

import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

MUST_START_WITH_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts with a user message."
)
MUST_ALTERNATE = (
    "A conversation must alternate between user and assistant roles. "
    "Make sure the conversation alternates between user and assistant roles and try again."
)
TOOL_CONFIG_REQUIRED = "The toolConfig field must be defined when using toolUse and toolResult content blocks."
# Bedrock passes Anthropic's own message through, behind its "model returned" prefix.
DUPLICATE_TOOL_NAMES = "The model returned the following errors: tools: Tool names must be unique."

# The patterns and limits of the service model (botocore's bedrock-runtime `ToolName`, `ToolUseId`).
TOOL_NAME_PATTERN = "[a-zA-Z0-9_-]+"
TOOL_USE_ID_PATTERN = "[a-zA-Z0-9_.:-]+"
_NAME_MAX = 64
_CONTENT_MEMBERS = ("text", "toolUse", "toolResult")
_TOOL_RESULT_MEMBERS = ("text", "json")
_TOOL_RESULT_STATUSES = ("success", "error")


class ConverseValidationError(Exception):
    """Answered as HTTP 400 `ValidationException`, as Bedrock does."""


def _blank_text(block_kind: str, where: str) -> ConverseValidationError:
    return ConverseValidationError(
        f"The text field in the {block_kind} object at {where} is blank. Add text to the text field, and try again."
    )


def _constraint(value: Any, where: str, constraint: str) -> ConverseValidationError:
    # AWS's request validator writes a missing member as `Value null`, without quotes.
    shown = "null" if value is None else f"'{value}'"
    return ConverseValidationError(
        f"1 validation error detected: Value {shown} at '{where}' failed to satisfy constraint: {constraint}"
    )


def _not_a_json_object(where: str) -> ConverseValidationError:
    return ConverseValidationError(
        f"The format of the value at {where} is invalid. Provide a json object for the field and try again."
    )


def _unsupported(member: str, where: str) -> ConverseValidationError:
    # Emulator wording: Bedrock accepts these members; the emulator does not implement them, and
    # saying so beats silently ignoring them.
    return ConverseValidationError(f"The Bedrock emulator does not support the {member} member at {where}.")


def _check_name(value: Any, where: str, pattern: str) -> None:
    """A `ToolName`/`ToolUseId` string: required, 1 to 64 characters, matching `pattern`."""
    if value is None:
        raise _constraint(None, where, "Member must not be null")
    if not isinstance(value, str):
        raise _constraint(value, where, "Member must be a string")
    if not value:
        raise _constraint(value, where, "Member must have length greater than or equal to 1")
    if len(value) > _NAME_MAX:
        raise _constraint(value, where, f"Member must have length less than or equal to {_NAME_MAX}")
    if re.fullmatch(pattern, value) is None:
        raise _constraint(value, where, f"Member must satisfy regular expression pattern: {pattern}")


def _check_tool_use(tool_use: Any, message: int, block: int) -> None:
    member = f"messages.{message + 1}.member.content.{block + 1}.member.toolUse"
    if not isinstance(tool_use, Mapping):
        raise _constraint(None, member, "Member must not be null")
    _check_name(tool_use.get("toolUseId"), f"{member}.toolUseId", TOOL_USE_ID_PATTERN)
    _check_name(tool_use.get("name"), f"{member}.name", TOOL_NAME_PATTERN)
    if not isinstance(tool_use.get("input"), Mapping):
        raise _not_a_json_object(f"messages.{message}.content.{block}.toolUse.input")


def _check_tool_result(tool_result: Any, message: int, block: int) -> None:
    member = f"messages.{message + 1}.member.content.{block + 1}.member.toolResult"
    where = f"messages.{message}.content.{block}.toolResult"
    if not isinstance(tool_result, Mapping):
        raise _constraint(None, member, "Member must not be null")
    _check_name(tool_result.get("toolUseId"), f"{member}.toolUseId", TOOL_USE_ID_PATTERN)
    status = tool_result.get("status")
    if status is not None and status not in _TOOL_RESULT_STATUSES:
        raise _constraint(status, f"{member}.status", "Member must satisfy enum value set: [success, error]")
    content = tool_result.get("content")
    if not isinstance(content, list):
        raise _constraint(None, f"{member}.content", "Member must not be null")
    if not content and status == "error":
        raise ConverseValidationError(f"The content field at {where} cannot be empty when status value is error.")
    for index, item in enumerate(content):
        if not isinstance(item, Mapping) or len(item) != 1:
            raise ConverseValidationError(
                f"ToolResultContentBlock at {where}.content.{index} must set exactly one member."
            )
        (kind,) = item
        if kind not in _TOOL_RESULT_MEMBERS:
            raise _unsupported(str(kind), f"{where}.content.{index}")
        if kind == "json" and not isinstance(item["json"], Mapping):
            raise _not_a_json_object(f"{where}.content.{index}.json")
        if kind == "text" and not isinstance(item["text"], str):
            raise _constraint(item["text"], f"{member}.content.{index + 1}.member.text", "Member must be a string")


def _check_blocks(blocks: Any, message: int, role: str) -> None:
    where = f"messages.{message}.content"
    if not isinstance(blocks, list) or not blocks:
        raise ConverseValidationError(
            f"The content field in the Message object at {where} is empty. "
            "Add a ContentBlock object to the content field and try again."
        )
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping) or len(block) != 1:
            raise ConverseValidationError(f"ContentBlock at {where}.{index} must set exactly one member.")
        (kind,) = block
        if kind not in _CONTENT_MEMBERS:
            raise _unsupported(str(kind), f"{where}.{index}")
        if kind == "text" and (not isinstance(block["text"], str) or not block["text"].strip()):
            raise _blank_text("ContentBlock", f"{where}.{index}")
        if kind == "toolUse":
            # Emulator wording: only a model asks for a tool, only the caller answers one.
            if role != "assistant":
                raise ConverseValidationError(f"A toolUse block at {where}.{index} must be in an assistant message.")
            _check_tool_use(block["toolUse"], message, index)
        if kind == "toolResult":
            if role != "user":
                raise ConverseValidationError(f"A toolResult block at {where}.{index} must be in a user message.")
            _check_tool_result(block["toolResult"], message, index)


def _check_tool_config(config: Any) -> None:
    if not isinstance(config, Mapping):
        raise _constraint(None, "toolConfig.tools", "Member must not be null")
    tools = config.get("tools")
    if not isinstance(tools, list):
        raise _constraint(None, "toolConfig.tools", "Member must not be null")
    if not tools:
        raise _constraint("[]", "toolConfig.tools", "Member must have length greater than or equal to 1")
    names: list[str] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or len(tool) != 1:
            raise ConverseValidationError(f"Tool at toolConfig.tools.{index} must set exactly one member.")
        (kind,) = tool
        if kind != "toolSpec":
            raise _unsupported(str(kind), f"toolConfig.tools.{index}")
        spec = tool["toolSpec"]
        member = f"toolConfig.tools.{index + 1}.member.toolSpec"
        if not isinstance(spec, Mapping):
            raise _constraint(None, member, "Member must not be null")
        _check_name(spec.get("name"), f"{member}.name", TOOL_NAME_PATTERN)
        description = spec.get("description")
        if description is not None and (not isinstance(description, str) or not description):
            raise _constraint(
                description, f"{member}.description", "Member must have length greater than or equal to 1"
            )
        input_schema = spec.get("inputSchema")
        if not isinstance(input_schema, Mapping):
            raise _constraint(None, f"{member}.inputSchema", "Member must not be null")
        schema = input_schema.get("json")
        if not isinstance(schema, Mapping):
            raise _not_a_json_object(f"toolConfig.tools.{index}.toolSpec.inputSchema.json")
        if schema.get("type") != "object":
            raise ConverseValidationError(
                f"The value at toolConfig.tools.{index}.toolSpec.inputSchema.json.type "
                "must be one of the following: object."
            )
        names.append(spec["name"])
    if len(set(names)) != len(names):
        raise ConverseValidationError(DUPLICATE_TOOL_NAMES)


def _ids(message: Mapping[str, Any], kind: str) -> list[str]:
    return [str(block[kind]["toolUseId"]) for block in message["content"] if kind in block]


def _check_unique_ids(messages: Sequence[Mapping[str, Any]]) -> None:
    """A toolUse id appears once in the whole conversation, and a message answers it once
    (Bedrock: "The toolUse blocks at messages.2.content contain duplicate Ids: ...")."""
    seen: set[str] = set()
    for index, message in enumerate(messages):
        for kind in ("toolUse", "toolResult"):
            ids = _ids(message, kind)
            repeated = [i for i in ids if ids.count(i) > 1 or (kind == "toolUse" and i in seen)]
            if repeated:
                names = ", ".join(sorted(set(repeated)))
                raise ConverseValidationError(
                    f"The {kind} blocks at messages.{index}.content contain duplicate Ids: {names}"
                )
        seen.update(_ids(message, "toolUse"))


def _check_tool_pairing(messages: Sequence[Mapping[str, Any]]) -> None:
    """Each toolResult answers a toolUse of the assistant message just before it, and each toolUse
    gets its result in the next user message (Bedrock checks it per turn, by id)."""
    _check_unique_ids(messages)
    for index, message in enumerate(messages):
        if message["role"] != "user":
            continue
        results = _ids(message, "toolResult")
        uses = _ids(messages[index - 1], "toolUse") if index > 0 else []
        if len(results) > len(uses):
            raise ConverseValidationError(
                f"The number of toolResult blocks at messages.{index}.content exceeds the number of "
                "toolUse blocks of previous turn."
            )
        missing = [tool_use_id for tool_use_id in uses if tool_use_id not in results]
        if missing:
            raise ConverseValidationError(
                f"Expected toolResult blocks at messages.{index}.content for the following Ids: {', '.join(missing)}"
            )


def validate_converse_request(model_id: str, body: Mapping[str, Any]) -> None:
    """Raise ConverseValidationError where Bedrock would answer with a ValidationException."""
    if not model_id.strip():
        raise ConverseValidationError("The provided model identifier is invalid.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ConverseValidationError(MUST_START_WITH_USER)
    roles: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise _constraint(
                None if not isinstance(message, Mapping) else message.get("role"),
                f"messages.{index + 1}.member.role",
                "Member must satisfy enum value set: [user, assistant]",
            )
        roles.append(message["role"])
        _check_blocks(message.get("content"), index, message["role"])
    if roles[0] != "user":
        raise ConverseValidationError(MUST_START_WITH_USER)
    if any(previous == current for previous, current in pairwise(roles)):
        raise ConverseValidationError(MUST_ALTERNATE)
    system = body.get("system", [])
    if not isinstance(system, list):
        raise _constraint(type(system).__name__, "system", "Member must be a list")
    for index, block in enumerate(system):
        if not isinstance(block, Mapping) or not str(block.get("text", "")).strip():
            raise _blank_text("SystemContentBlock", f"system.{index}")
    _check_inference_config(body.get("inferenceConfig") or {})
    if body.get("toolConfig") is not None:
        _check_tool_config(body["toolConfig"])
    elif any(_ids(message, "toolUse") or _ids(message, "toolResult") for message in messages):
        raise ConverseValidationError(TOOL_CONFIG_REQUIRED)
    _check_tool_pairing(messages)


def _check_inference_config(config: Mapping[str, Any]) -> None:
    max_tokens = config.get("maxTokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise _constraint(max_tokens, "inferenceConfig.maxTokens", "Member must have value greater than or equal to 1")
    for name in ("temperature", "topP"):
        value = config.get(name)
        if value is not None and not 0 <= float(value) <= 1:
            raise _constraint(value, f"inferenceConfig.{name}", "Member must have value less than or equal to 1")


def message_text(message: Mapping[str, Any]) -> str:
    """All text blocks of a Converse message, joined (for the scripted coach's reading)."""
    blocks: Sequence[Mapping[str, Any]] = message.get("content", [])
    return "\n".join(str(block["text"]) for block in blocks if "text" in block)

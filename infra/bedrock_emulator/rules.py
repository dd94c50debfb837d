"""The request checks Bedrock's Converse API applies (for Anthropic models), with its wording."""

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


class ConverseValidationError(Exception):
    """Answered as HTTP 400 `ValidationException`, as Bedrock does."""


def _blank_text(block_kind: str, where: str) -> ConverseValidationError:
    return ConverseValidationError(
        f"The text field in the {block_kind} object at {where} is blank. Add text to the text field, and try again."
    )


def _constraint(value: Any, where: str, constraint: str) -> ConverseValidationError:
    return ConverseValidationError(
        f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy constraint: {constraint}"
    )


def _check_blocks(blocks: Any, where: str) -> None:
    if not isinstance(blocks, list) or not blocks:
        raise ConverseValidationError(
            f"The content field in the Message object at {where} is empty. "
            "Add a ContentBlock object to the content field and try again."
        )
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping) or len(block) != 1:
            raise ConverseValidationError(f"ContentBlock at {where}.{index} must set exactly one member.")
        if "text" in block and (not isinstance(block["text"], str) or not block["text"].strip()):
            raise _blank_text("ContentBlock", f"{where}.{index}")


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
        _check_blocks(message.get("content"), f"messages.{index}.content")
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

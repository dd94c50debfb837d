"""The request checks Bedrock's Converse API applies (for Anthropic models), with its wording."""

from collections.abc import Mapping, Sequence
from typing import Any


class ConverseValidationError(Exception):
    """Answered as HTTP 400 `ValidationException`, as Bedrock does."""


def _check_blocks(blocks: Any, where: str) -> None:
    if not isinstance(blocks, list) or not blocks:
        raise ConverseValidationError(f"The content field in the Message object at {where} is empty. Add a ContentBlock object to the content field and try again.")
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping) or len(block) != 1:
            raise ConverseValidationError(f"ContentBlock at {where}.{index} must set exactly one member.")
        if "text" in block:
            text = block["text"]
            if not isinstance(text, str) or not text.strip():
                raise ConverseValidationError(
                    f"The text field in the ContentBlock object at {where}.{index} is blank. Add text to the text field, and try again."
                )


def validate_converse_request(model_id: str, body: Mapping[str, Any]) -> None:
    """Raise ConverseValidationError where Bedrock would answer with a ValidationException."""
    if not model_id.strip():
        raise ConverseValidationError("The provided model identifier is invalid.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ConverseValidationError("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
    roles: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise ConverseValidationError(f"Value at 'messages.{index + 1}.member.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]")
        roles.append(message["role"])
        _check_blocks(message.get("content"), f"messages.{index}.content")
    if roles[0] != "user":
        raise ConverseValidationError("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
    if any(previous == current for previous, current in zip(roles, roles[1:], strict=False)):
        raise ConverseValidationError(
            "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
        )
    system = body.get("system", [])
    if not isinstance(system, list):
        raise ConverseValidationError("Value at 'system' failed to satisfy constraint: Member must be a list")
    for index, block in enumerate(system):
        if not isinstance(block, Mapping) or not str(block.get("text", "")).strip():
            raise ConverseValidationError(f"The text field in the SystemContentBlock object at system.{index} is blank. Add text to the text field, and try again.")
    _check_inference_config(body.get("inferenceConfig") or {})


def _check_inference_config(config: Mapping[str, Any]) -> None:
    max_tokens = config.get("maxTokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ConverseValidationError(
            f"1 validation error detected: Value '{max_tokens}' at 'inferenceConfig.maxTokens' failed to satisfy constraint: Member must have value greater than or equal to 1"
        )
    for name, upper in (("temperature", 1.0), ("topP", 1.0)):
        value = config.get(name)
        if value is not None and not 0 <= float(value) <= upper:
            raise ConverseValidationError(f"1 validation error detected: Value '{value}' at 'inferenceConfig.{name}' failed to satisfy constraint: Member must have value less than or equal to {upper}")


def message_text(message: Mapping[str, Any]) -> str:
    """All text blocks of a Converse message, joined (for the scripted coach's reading)."""
    blocks: Sequence[Mapping[str, Any]] = message.get("content", [])
    return "\n".join(str(block["text"]) for block in blocks if "text" in block)

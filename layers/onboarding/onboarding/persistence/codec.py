"""Owns the item codec: messages, state, profile and summary as DynamoDB items, and back.

One typed codec, both ways, so the stored shape is written down once. Reads never fail on a
malformed item: it is skipped (None) with a warning that names only the kind of error, since an
item's content is personal data.
"""

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from pydantic import ValidationError

from onboarding.model.history import ConversationSummary
from onboarding.model.messages import ROLES, Message, ToolCall
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState, WaitingFor
from onboarding.persistence.schema import (
    PROFILE_SORT_KEY,
    STATE_SORT_KEY,
    SUMMARY_SORT_KEY,
    message_id_of,
    message_sort_key,
    user_key,
)

logger = Logger(child=True)

Item = dict[str, Any]


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


def message_item(user_id: str, message: Message, ttl_s: int | None) -> Item:
    if message.created_at is None or not message.message_id:
        raise ValueError("only a message with an id and a time can be stored")
    item: Item = {
        **user_key(user_id, message_sort_key(message.message_id)),
        "role": {"S": message.role},
        "content": {"S": message.content},
        "created_at": {"S": message.created_at.isoformat()},
    }
    if message.tool_calls:
        item["tool_calls"] = {"S": json.dumps([c.as_entry() for c in message.tool_calls], ensure_ascii=False)}
    if message.tool_call_id is not None:
        item["tool_call_id"] = {"S": message.tool_call_id}
    if ttl_s is not None:
        item["expires_at"] = {"N": str(int(message.created_at.timestamp()) + ttl_s)}
    return item


def parse_message(item: Mapping[str, Any], now_s: float) -> Message | None:
    """The message in `item`; None for an expired one (TTL deletion lags by days) or, with a
    warning, for one that cannot be understood."""
    try:
        expires_at = item.get("expires_at", {}).get("N")
        if expires_at is not None and int(expires_at) <= now_s:
            return None
        role = item["role"]["S"]
        if role not in ROLES:
            raise ValueError("unknown role")
        calls = json.loads(item["tool_calls"]["S"]) if "tool_calls" in item else []
        tool_call_id = item.get("tool_call_id", {}).get("S")
        if role == "tool" and not tool_call_id:
            raise ValueError("a tool result without its call id")
        return Message(
            role=role,
            content=item["content"]["S"],
            message_id=message_id_of(item["sk"]["S"]),
            created_at=datetime.fromisoformat(item["created_at"]["S"]),
            tool_calls=tuple(ToolCall(c["id"], c["name"], c["args"]) for c in calls),
            tool_call_id=tool_call_id,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        logger.warning("Skipping malformed message item", extra={"reason": type(error).__name__})
        return None


def version_of(item: Mapping[str, Any] | None) -> int:
    """The version a state or profile item was written at (0: no item, or one written before
    items carried versions)."""
    try:
        return int((item or {}).get("version", {}).get("N", "0"))
    except (TypeError, ValueError, AttributeError):
        return 0


def state_item(user_id: str, state: OnboardingState, now_s: float, version: int = 1) -> Item:
    dumped = state.model_dump(mode="json")
    item: Item = {
        **user_key(user_id, STATE_SORT_KEY),
        "version": {"N": str(version)},
        "current_agent": {"S": state.current_agent.value},
        "agent_context": {"S": json.dumps(dumped["agent_context"], ensure_ascii=False)},
        "skipped": {"S": json.dumps(dumped["skipped"])},
        "updated_at": {"S": _iso(now_s)},
    }
    if state.waiting_for is not None:
        item["waiting_for"] = {"S": json.dumps(dumped["waiting_for"])}
    if state.completed_at is not None:
        item["completed_at"] = {"S": state.completed_at.isoformat()}
    return item


def parse_state(item: Mapping[str, Any]) -> OnboardingState | None:
    try:
        waiting = item.get("waiting_for", {}).get("S")
        completed = item.get("completed_at", {}).get("S")
        return OnboardingState(
            current_agent=item["current_agent"]["S"],
            agent_context=json.loads(item.get("agent_context", {}).get("S", "{}")),
            waiting_for=WaitingFor.model_validate_json(waiting) if waiting else None,
            skipped=json.loads(item.get("skipped", {}).get("S", "[]")),
            completed_at=datetime.fromisoformat(completed) if completed else None,
        )
    except (KeyError, TypeError, ValueError, ValidationError) as error:
        logger.warning("Ignoring malformed onboarding state item", extra={"reason": type(error).__name__})
        return None


def profile_item(user_id: str, profile: UserProfile, now_s: float, version: int = 1) -> Item:
    return {
        **user_key(user_id, PROFILE_SORT_KEY),
        "version": {"N": str(version)},
        "profile": {"S": profile.model_dump_json()},
        "updated_at": {"S": _iso(now_s)},
    }


def parse_profile(item: Mapping[str, Any]) -> UserProfile | None:
    try:
        return UserProfile.model_validate_json(item["profile"]["S"])
    except (KeyError, TypeError, ValidationError) as error:
        logger.warning("Ignoring malformed profile item", extra={"reason": type(error).__name__})
        return None


def summary_item(user_id: str, summary: ConversationSummary, now_s: float) -> Item:
    return {
        **user_key(user_id, SUMMARY_SORT_KEY),
        "text": {"S": summary.text},
        "through": {"S": summary.through_message_id},
        "updated_at": {"S": _iso(now_s)},
    }


def parse_summary(item: Mapping[str, Any]) -> ConversationSummary | None:
    try:
        saved = item.get("updated_at", {}).get("S")
        return ConversationSummary(
            text=item["text"]["S"],
            through_message_id=item["through"]["S"],
            saved_at=datetime.fromisoformat(saved) if saved else None,
        )
    except (KeyError, TypeError, ValueError) as error:
        logger.warning("Ignoring malformed summary item", extra={"reason": type(error).__name__})
        return None

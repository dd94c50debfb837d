"""Puts a user in a given state for tests: items written straight into the table (the store has
no public method to overwrite state or profile: a turn commits them with its reply), or a commit
as a turn would make it."""

import time
from collections.abc import Sequence
from typing import Any

from onboarding.model.history import CommittedTurn, TurnCommit
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.state import OnboardingState
from onboarding.persistence import Repositories
from onboarding.persistence.codec import profile_item, state_item


def save_state(client: Any, table: str, user_id: str, state: OnboardingState) -> None:
    client.put_item(TableName=table, Item=state_item(user_id, state, time.time()))


def save_profile(client: Any, table: str, user_id: str, profile: UserProfile) -> None:
    client.put_item(TableName=table, Item=profile_item(user_id, profile, time.time()))


def commit(
    store: Repositories,
    user_id: str,
    drafts: Sequence[Message],
    client_id: str | None = None,
    state: OnboardingState | None = None,
    profile: UserProfile | None = None,
) -> CommittedTurn:
    """Commit a turn's messages (and state or profile) at the versions stored now, as a turn that
    read them just before would."""
    memory = store.conversations.load_memory(user_id)
    return store.writes.commit_reply(
        TurnCommit(user_id, tuple(drafts), memory, state=state, profile=profile, client_id=client_id)
    )

"""The flags' percentage rollout: Powertools' MODULO_RANGE over a stable bucket of the user id
puts each user in the same arm on every instance and every turn (the app and SMS share the user
id once linked), near the set share of 10,000 users, and a user in at 10 % stays in at 25, 50, 100."""

import uuid
from random import Random
from typing import Any

import pytest
from aws_lambda_powertools.utilities.feature_flags import StoreProvider
from hypothesis import given
from hypothesis import strategies as st

from onboarding.flags.rollout import Rollout, rollout_bucket

_RANDOM = Random(21)
IDS = [str(uuid.UUID(int=_RANDOM.getrandbits(128), version=4)) for _ in range(10_000)]  # Cognito subs' shape


class Fixed(StoreProvider):
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    @property
    def get_raw_configuration(self) -> dict[str, Any]:
        return self.config

    def get_configuration(self) -> dict[str, Any]:
        return self.config


def rollout(percent: int) -> Rollout:
    """Memory on for `percent` % of users, as docs/rollout.md writes it."""
    rule = {"action": "MODULO_RANGE", "key": "rollout_bucket", "value": {"BASE": 100, "START": 0, "END": percent - 1}}
    return Rollout(
        Fixed({"memory": {"default": False, "rules": {"rollout": {"when_match": True, "conditions": [rule]}}}}), 60
    )


@pytest.mark.parametrize("percent", [10, 25, 50, 100])
def test_the_share_of_users_in_the_memory_arm_is_near_the_set_percentage(percent: int) -> None:
    assert len(set(IDS)) == len(IDS)
    flags = rollout(percent)
    share = sum(flags.for_user(user).memory for user in IDS) / len(IDS)
    assert percent - 1 <= share * 100 <= percent + 1, share


def test_each_user_is_in_the_same_arm_on_another_instance_and_stays_in_as_the_rollout_grows() -> None:
    first, second, wider = rollout(10), rollout(10), rollout(25)
    arms = [first.for_user(user).memory for user in IDS]
    assert arms == [second.for_user(user).memory for user in IDS]  # a second instance, a later turn
    assert all(wider.for_user(user).memory for user, on in zip(IDS, arms, strict=True) if on)


@given(st.text(min_size=1, max_size=200))
def test_the_bucket_is_a_stable_integer_of_the_id_alone(user_id: str) -> None:
    bucket = rollout_bucket(user_id)
    assert isinstance(bucket, int)
    assert bucket >= 0
    assert bucket == rollout_bucket(str(user_id))
    assert rollout(10).for_user(user_id).memory == (bucket % 100 < 10)

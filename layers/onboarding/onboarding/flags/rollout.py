"""Owns evaluating the memory's feature flags for a user (docs/rollout.md, decision 0021).

Powertools' Feature Flags utility does the evaluation (rules, the MODULO_RANGE percentage rule)
over a store: AppConfig deployed, a JSON file of the same shape locally (`FileStore`). Around
either store, `LastKnownStore` keeps the turn independent of it: when the store cannot be reached
or holds an invalid configuration, the last valid one stays in force (the documented defaults if
there never was one), a warning is logged and `FeatureFlagsUnavailable` counted, and the store is
not asked again before the cache's max age, so an outage costs one failed fetch per max age.
"""

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.feature_flags import FeatureFlags, StoreProvider
from aws_lambda_powertools.utilities.feature_flags.exceptions import ConfigurationStoreError, SchemaValidationError
from aws_lambda_powertools.utilities.feature_flags.schema import SchemaValidator

from onboarding.flags import (
    DEFAULT_FLAGS,
    GAP_FLAG,
    MEMORY_FLAG,
    PROFILE_FLAG,
    RECALL_FLAG,
    ROLLOUT_KEY,
    SUMMARY_FLAG,
    MemoryFlags,
)
from onboarding.metrics import count_metric

logger = Logger(child=True)


def rollout_bucket(user_id: str) -> int:
    """A stable integer for `user_id` (MODULO_RANGE needs an integer): the first 8 bytes of its
    SHA-256. The same on every instance and in every run (unlike `hash()`), and spread evenly, so
    `bucket % 100 <= 9` holds for about 10 % of users, always the same ones."""
    return int.from_bytes(hashlib.sha256(user_id.encode("utf-8")).digest()[:8], "big")


class FileStore(StoreProvider):
    """The flags from a JSON file, read again once `max_age_s` has passed (as AppConfigStore's
    cache does), so an edit takes effect without a restart. For local runs (FEATURE_FLAGS_FILE)."""

    def __init__(self, path: Path, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._path, self._max_age_s, self._clock = path, max_age_s, clock
        self._cached: dict[str, Any] | None = None
        self._read_at = 0.0

    @property
    def get_raw_configuration(self) -> dict[str, Any]:
        now = self._clock()
        if self._cached is None or now - self._read_at >= self._max_age_s:
            self._read_at = now
            try:
                document = json.loads(self._path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ConfigurationStoreError(f"cannot read the flags file: {type(error).__name__}") from error
            if not isinstance(document, dict):
                raise ConfigurationStoreError("the flags file does not hold a JSON object")
            self._cached = document
        return self._cached

    def get_configuration(self) -> dict[str, Any]:
        return self.get_raw_configuration


class LastKnownStore(StoreProvider):
    """`store`, validated; when it fails, the last valid configuration (or ConfigurationStoreError,
    which makes Powertools return each flag's default) until `retry_after_s` has passed."""

    def __init__(self, store: StoreProvider, retry_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._retry_after_s, self._clock = store, retry_after_s, clock
        self._last: dict[str, Any] | None = None
        self._failed_at: float | None = None

    @property
    def get_raw_configuration(self) -> dict[str, Any]:
        return self.get_configuration()

    def get_configuration(self) -> dict[str, Any]:
        if self._failed_at is None or self._clock() - self._failed_at >= self._retry_after_s:
            try:
                config = self._store.get_configuration()
                if config is not self._last:  # a cached store returns the same object: validated already
                    SchemaValidator(schema=config).validate()
            except (ConfigurationStoreError, SchemaValidationError) as error:
                self._failed_at = self._clock()
                logger.warning(
                    "Feature flags unavailable; keeping the last known flags",
                    extra={"reason": type(error).__name__, "last_known": self._last is not None},
                )
                count_metric("FeatureFlagsUnavailable")
            else:
                self._failed_at, self._last = None, config
        if self._last is None:
            raise ConfigurationStoreError("no feature flags were read yet")
        return self._last


class Rollout:
    """The memory's flags for one user, evaluated by Powertools over `store` (None: the defaults)."""

    def __init__(
        self, store: StoreProvider | None, retry_after_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._flags = None if store is None else FeatureFlags(store=LastKnownStore(store, retry_after_s, clock))

    def for_user(self, user_id: str) -> MemoryFlags:
        """Never raises: a turn never fails because of its flags."""
        if (flags := self._flags) is None:
            return DEFAULT_FLAGS
        context = {"user_id": user_id, ROLLOUT_KEY: rollout_bucket(user_id)}

        def flag(name: str, default: bool) -> bool:
            return bool(flags.evaluate(name=name, context=context, default=default))

        try:
            return MemoryFlags(
                memory=flag(MEMORY_FLAG, DEFAULT_FLAGS.memory),
                summary=flag(SUMMARY_FLAG, DEFAULT_FLAGS.summary),
                profile=flag(PROFILE_FLAG, DEFAULT_FLAGS.profile),
                gap=flag(GAP_FLAG, DEFAULT_FLAGS.gap),
                recall=flag(RECALL_FLAG, DEFAULT_FLAGS.recall),
            )
        except Exception as error:  # a flag must never fail the turn: the defaults instead
            logger.warning(
                "Feature flags could not be evaluated; using the defaults", extra={"reason": type(error).__name__}
            )
            count_metric("FeatureFlagsUnavailable")
            return DEFAULT_FLAGS

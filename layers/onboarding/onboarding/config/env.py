"""Owns reading settings from environment variables (each class names its variables in ENV_NAMES)."""

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict


class _FromEnv(BaseModel):
    """A frozen model read from environment variables named in `ENV_NAMES` (unset keeps defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")  # a misspelt setting is an error, not a default

    ENV_NAMES: ClassVar[dict[str, str]] = {}

    @classmethod
    def _env_values(cls, env: Mapping[str, str]) -> dict[str, Any]:
        return {field: env[var] for field, var in cls.ENV_NAMES.items() if env.get(var, "") != ""}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        return cls.model_validate(cls._env_values(os.environ if environ is None else environ))

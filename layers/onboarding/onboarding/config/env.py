"""Owns reading settings from environment variables: each field names its variable on itself,
`Field(validation_alias="VARIABLE")` (or `AliasChoices` of several, the first set one winning), so a
setting and its variable are declared together. Code passes settings by their field names."""

import os
from collections.abc import Mapping
from typing import Any, Self

from pydantic import AliasChoices, BaseModel, ConfigDict


class _FromEnv(BaseModel):
    """A frozen model read from the environment variables its fields name (unset or empty keeps the
    default). Rejected: pydantic-settings, a second dependency on the SMS webhook's cold path for
    what these few lines do."""

    # A misspelt setting is an error, not a default; fields are given by name in code, by variable
    # from the environment.
    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    @classmethod
    def _variables(cls) -> dict[str, tuple[str, ...]]:
        """Each field read from the environment -> its variables, in order of precedence."""
        found: dict[str, tuple[str, ...]] = {}
        for field, info in cls.model_fields.items():
            alias = info.validation_alias
            if isinstance(alias, str):
                found[field] = (alias,)
            elif isinstance(alias, AliasChoices):
                found[field] = tuple(choice for choice in alias.choices if isinstance(choice, str))
        return found

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Each field read from the environment -> its (first) variable."""
        return {field: variables[0] for field, variables in cls._variables().items()}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for variables in cls._variables().values():
            # Only the first variable set is given: the others would be refused as unknown inputs.
            if chosen := next((variable for variable in variables if env.get(variable, "") != ""), None):
                values[chosen] = env[chosen]
        return cls.model_validate(values)

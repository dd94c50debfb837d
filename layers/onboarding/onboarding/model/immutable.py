"""Owns deep-freezing of JSON-like data, so that an 'immutable' model is immutable all the way down."""

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import AfterValidator, PlainSerializer


def deep_freeze(value: Any) -> Any:
    """Return a read-only copy of `value`: mappings become read-only mappings, lists become tuples.

    A copy is taken first, so a caller that keeps a reference to the dict it passed in cannot
    change the frozen value behind our back.
    """
    if getattr(type(value), "__frozen_value__", False):
        return value  # immutable already (a Message)
    if isinstance(value, Mapping):
        return MappingProxyType({key: deep_freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(deep_freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """Inverse of `deep_freeze` for serialisation: plain dicts and lists again."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


# Pydantic's `frozen=True` only stops attribute assignment; a list field could still be appended
# to. So validated values are deep-frozen copies (tuple of read-only mappings), and they
# serialise back to plain lists and dicts.
FrozenHistory = Annotated[
    Sequence[Mapping[str, Any]],
    AfterValidator(deep_freeze),
    PlainSerializer(thaw, return_type=list[dict[str, Any]]),
]
FrozenMapping = Annotated[
    Mapping[str, Any],
    AfterValidator(deep_freeze),
    PlainSerializer(thaw, return_type=dict[str, Any]),
]

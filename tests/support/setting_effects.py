"""Which test shows each setting's effect: `@observes("field")` on a test that sets the field to a
non-default value and checks what changes. A meta-test holds the list against every settings
class, so a new setting without such a test fails the suite."""

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

OBSERVED: dict[str, list[str]] = {}


def observes(*fields: str) -> Callable[[F], F]:
    def register(test: F) -> F:
        for field in fields:
            OBSERVED.setdefault(field, []).append(f"{test.__module__}::{test.__name__}")
        return test

    return register

"""Owns IAM's evaluation of identity-based policy statements, for one action on one resource.

As IAM's policy evaluation logic says: an explicit Deny in any matching statement wins; else an
Allow in a matching statement allows; else the request is implicitly denied. A statement matches
when its Action (or NotAction) covers the action (case-insensitive, `*` and `?` wildcards), its
Resource (or NotResource) covers the resource (case-sensitive), and every condition holds: every
operator, every key under it, any of the key's values.

Only what can be evaluated faithfully is evaluated: the string, ARN, Bool and Null operators (with
`...IfExists` and the `ForAnyValue:`/`ForAllValues:` set qualifiers), on the condition keys the
operation table sets (infra/local/iam/actions.py). A statement that uses anything else (another
operator, another key, a policy variable) raises UnsupportedPolicy, and the gate refuses the
request it governs: the check fails closed rather than guessing.
"""

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from infra.local.iam.actions import SUPPLIED_CONDITION_KEYS, Authorization

Statement = Mapping[str, Any]


class UnsupportedPolicy(Exception):  # noqa: N818 - a refusal, named for what it says
    """A statement the local check cannot evaluate faithfully."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    explicit_deny: bool = False


@cache
def _pattern(glob: str, ignore_case: bool) -> re.Pattern[str]:
    if "${" in glob:
        raise UnsupportedPolicy(f"the policy variable in {glob!r}")
    body = "".join(".*" if char == "*" else "." if char == "?" else re.escape(char) for char in glob)
    return re.compile(f"^{body}$", re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def _listed(value: Any) -> list[str]:
    return [str(item) for item in (value if isinstance(value, list) else [value])]


def _covers(globs: Any, value: str, ignore_case: bool) -> bool:
    return any(_pattern(glob, ignore_case).match(value) for glob in _listed(globs))


def _arn_like(expected: str, actual: str) -> bool:
    """ArnLike/ArnEquals: each of the six colon-separated parts matched on its own, wildcards allowed."""
    wanted, given = expected.split(":", 5), actual.split(":", 5)
    return len(wanted) == len(given) == 6 and all(
        _pattern(part, False).match(value) for part, value in zip(wanted, given, strict=True)
    )


_MATCHERS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda expected, actual: expected == actual,
    "StringEqualsIgnoreCase": lambda expected, actual: expected.lower() == actual.lower(),
    "StringLike": lambda expected, actual: _pattern(expected, False).match(actual) is not None,
    "ArnEquals": _arn_like,
    "ArnLike": _arn_like,
    "Bool": lambda expected, actual: expected.lower() == actual.lower(),
}
_NEGATED: dict[str, str] = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, str]) -> bool:
    if key.lower() not in SUPPLIED_CONDITION_KEYS:
        raise UnsupportedPolicy(f"the condition key {key}")
    qualifier, _, operator = operator.rpartition(":")
    if qualifier not in ("", "ForAnyValue", "ForAllValues"):
        raise UnsupportedPolicy(f"the condition qualifier {qualifier}")
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    if operator != "Null" and _NEGATED.get(operator, operator) not in _MATCHERS:
        raise UnsupportedPolicy(f"the condition operator {operator}")
    actual = next((value for name, value in context.items() if name.lower() == key.lower()), None)
    if operator == "Null":
        return (actual is None) == (str(expected).lower() == "true")
    if actual is None:
        # An absent key: no match, except for a negated operator or ...IfExists (and ForAllValues,
        # which holds for an empty set).
        return if_exists or operator in _NEGATED or qualifier == "ForAllValues"
    base = _NEGATED.get(operator, operator)
    matched = any(_MATCHERS[base](value, actual) for value in _listed(expected))
    return not matched if operator in _NEGATED else matched


def _conditions_hold(statement: Statement, context: Mapping[str, str]) -> bool:
    conditions: Mapping[str, Mapping[str, Any]] = statement.get("Condition") or {}
    return all(
        _condition_holds(operator, key, expected, context)
        for operator, keys in conditions.items()
        for key, expected in keys.items()
    )


def _matches(statement: Statement, request: Authorization) -> bool:
    if "NotAction" in statement:
        action_ok = not _covers(statement["NotAction"], request.action, True)
    else:
        action_ok = _covers(statement.get("Action", []), request.action, True)
    if not action_ok:
        return False
    if "NotResource" in statement:
        resource_ok = not _covers(statement["NotResource"], request.resource, False)
    else:
        resource_ok = _covers(statement.get("Resource", []), request.resource, False)
    return resource_ok and _conditions_hold(statement, request.context)


def decide(statements: Sequence[Statement], request: Authorization) -> Decision:
    """IAM's answer to `request` under `statements` (UnsupportedPolicy if one cannot be evaluated)."""
    allowed = False
    for statement in statements:
        if _matches(statement, request):
            if statement.get("Effect") == "Deny":
                return Decision(allowed=False, explicit_deny=True)
            allowed = allowed or statement.get("Effect") == "Allow"
    return Decision(allowed=allowed)


def actions_of(statements: Iterable[Statement]) -> set[str]:
    """Every action the statements name (as written)."""
    return {action for statement in statements for action in _listed(statement.get("Action", []))}

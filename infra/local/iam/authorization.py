"""What the IAM check works with: where a request is answered (`Place`), each thing IAM must allow
for it (`Authorization`: an action on a resource, with the request's condition keys), the refusal
of an operation the table does not know, and the ARNs the table builds (infra/local/iam/actions.py)."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Place:
    """Where a request is answered: its region (from its signature) and the local account."""

    region: str
    account: str
    partition: str = "aws"


@dataclass(frozen=True)
class Authorization:
    """One thing IAM must allow for a request: an action on a resource, with the request's context."""

    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


class UnknownOperation(Exception):  # noqa: N818 - a refusal, named for what it says
    """The table has no row for this operation: the request is refused (fail closed)."""


# Condition keys the table sets (besides aws:RequestedRegion, set on every request). A policy whose
# condition names any other key cannot be evaluated here, and the gate refuses what it governs.
SUPPLIED_CONDITION_KEYS = frozenset(
    {"aws:requestedregion", "dynamodb:enclosingoperation", "bedrock:inferenceprofilearn"}
)


def arn(place: Place, service: str, resource: str, account: bool = True) -> str:
    return f"arn:{place.partition}:{service}:{place.region}:{place.account if account else ''}:{resource}"

"""Owns the audit trail of context access: one log line whenever a user's memory is read or erased.

Every line has the message "Context access" and these fields (docs/audit-trail.md):

- `audit`: true, so one filter finds the whole trail;
- `access`: `read` or `erase`;
- `who`: the caller, `cognito:<sub>` for the app's verified user, `function:<name>` for a Lambda
  acting on its own (the SMS worker answering a text), `command:<module>` for an operator's tool;
- `whose`: the user id whose memory it is. User ids are opaque keys (a Cognito `sub`, or `sms-` and
  a UUID for a number that texted first), never a phone number or a name;
- `why`: the route (`POST:/chat`) or the command;
- `what_<kind>`: how many of each kind were read or erased (messages, answers, profile fields,
  summary...). Counts only: no text a user said ever reaches this line.

Called by the services (TurnService, AccountService) and by the operator tools, after the read
succeeded: a read that failed or was skipped showed nothing to anyone.
"""

import os
from dataclasses import dataclass
from typing import Literal

from aws_lambda_powertools import Logger

from onboarding.model.history import TurnContext
from onboarding.model.users import ErasureReport

logger = Logger(child=True)


@dataclass(frozen=True)
class Caller:
    """Who reads a user's memory, and why (each a short token: log fields hold no free text)."""

    who: str
    why: str

    @classmethod
    def verified_user(cls, sub: str, route: str) -> "Caller":
        """The app's caller, as API Gateway's Cognito authorizer verified them."""
        return cls(f"cognito:{sub}", route)

    @classmethod
    def function(cls, why: str) -> "Caller":
        """The running Lambda function itself (its name; `local` outside Lambda)."""
        return cls(f"function:{os.environ.get('AWS_LAMBDA_FUNCTION_NAME') or 'local'}", why)

    @classmethod
    def command(cls, name: str, why: str | None = None) -> "Caller":
        """An operator's tool, such as `infra.inspect_prompt`."""
        return cls(f"command:{name}", why or name)


def context_counts(loaded: TurnContext) -> dict[str, int]:
    """What a turn's read brought back, by kind."""
    profile = loaded.profile
    profile_fields = sum(1 for name, value in profile if name != "other_facts" and value is not None) + len(
        profile.other_facts
    )
    return {
        "messages": len(loaded.messages),
        "answers": sum(len(fields) for fields in loaded.state.agent_context.values()),
        "profile_fields": profile_fields,
        "summary": int(loaded.summary is not None),
    }


def erasure_counts(report: ErasureReport) -> dict[str, int]:
    return {
        "messages": report.messages,
        "state_items": report.state_items,
        "phone_numbers": report.phone_numbers,
        "dedupe_records": report.dedupe_records,
        "link_codes": report.link_codes,
        "other_items": report.other_items,
        "check_in_schedules": report.check_in_schedules,
    }


def record_access(caller: Caller, whose: str, what: dict[str, int], access: Literal["read", "erase"] = "read") -> None:
    """The audit line for one access to `whose` memory: `what` holds counts by kind."""
    logger.info(
        "Context access",
        extra={
            "audit": True,
            "access": access,
            "who": caller.who,
            "whose": whose,
            "why": caller.why,
            **{f"what_{kind}": count for kind, count in what.items()},
        },
    )

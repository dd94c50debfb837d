"""Owns the local stand-in for the API stage's WAF web ACL: its rate-based rules, read from
template.yaml, applied by the local gateway to each request of the API's routes.

What it applies, as AWS WAF does: the rules in priority order; a rule counts the requests of each
key (the client IP, or the value of one header) over the rule's evaluation window, limited to the
requests its scope-down statement selects (here: whether a header is present), and once a key is
over the limit its requests get the rule's block response (status, body, headers) until the count
falls back. AWS counts in near real time and may let a few more through before it blocks; here the
count is exact.

AWS's managed rule groups (`ManagedRuleGroupStatement`) are declared but not evaluated: their rules
are AWS's and unpublished, and a guess at them would block or pass what AWS does not. The stack
names them in its log when it starts (`LocalWaf.not_evaluated`; docs/local-development.md).
Anything else it cannot apply it refuses at start (a statement or key it does not know): a
stand-in that silently let through what the template would block would hide the very failure it
is here to show.
"""

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from infra.local.deployment import LocalDeployment
from infra.local.errors import LocalToolError

logger = Logger(service="local-gateway")

WEB_ACL_TYPE = "AWS::WAFv2::WebACL"
ASSOCIATION_TYPE = "AWS::WAFv2::WebACLAssociation"


@dataclass(frozen=True)
class Block:
    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class RateRule:
    name: str
    limit: int
    window_s: int
    key: Callable[[Mapping[str, str], str], str | None]  # (headers, client IP) -> the count's key
    applies: Callable[[Mapping[str, str]], bool]  # the scope-down statement
    block: Block


class LocalWaf:
    """The web ACL's rate rules, in priority order; `check` is None for a request it lets through.
    `not_evaluated`: the managed rule groups the template declares, which it does not apply."""

    def __init__(
        self, rules: list[RateRule], clock: Callable[[], float] = time.monotonic, not_evaluated: tuple[str, ...] = ()
    ) -> None:
        self.rules = rules
        self.not_evaluated = not_evaluated
        self._clock = clock
        self._seen: dict[tuple[str, str], deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def check(self, headers: Mapping[str, str], client_ip: str) -> Block | None:
        lowered = {name.lower(): value for name, value in headers.items()}
        now = self._clock()
        with self._lock:
            for rule in self.rules:
                if not rule.applies(lowered) or (key := rule.key(lowered, client_ip)) is None:
                    continue
                seen = self._seen[rule.name, key]
                while seen and seen[0] <= now - rule.window_s:
                    seen.popleft()
                seen.append(now)
                if len(seen) > rule.limit:
                    return rule.block
        return None


def local_waf(deployment: LocalDeployment) -> LocalWaf | None:
    """The web ACL associated with the API stage, or None when the deployment has none."""
    template = deployment.template
    associations = [
        body
        for body in template["Resources"].values()
        if body["Type"] == ASSOCIATION_TYPE and ("Condition" not in body or deployment.condition(body["Condition"]))
    ]
    if not associations:
        return None
    properties = deployment.resolve(template["Resources"][_web_acl_of(associations[0])]["Properties"])
    if "Allow" not in properties.get("DefaultAction", {}):
        raise LocalToolError("the local WAF applies only a web ACL whose default action is Allow")
    bodies = properties.get("CustomResponseBodies", {})
    rules = sorted(properties.get("Rules", []), key=lambda rule: int(rule["Priority"]))
    managed = tuple(_managed_group(rule) for rule in rules if "ManagedRuleGroupStatement" in rule["Statement"])
    rate_rules = [_rate_rule(rule, bodies) for rule in rules if "ManagedRuleGroupStatement" not in rule["Statement"]]
    waf = LocalWaf(rate_rules, not_evaluated=managed)
    logger.info(
        "Local WAF: rate rules applied; managed rule groups declared, not evaluated",
        extra={"applied": [rule.name for rule in rate_rules], "not_evaluated": list(managed)},
    )
    return waf


def _managed_group(rule: dict[str, Any]) -> str:
    """`<vendor>/<group>` of a managed rule group (which the local WAF does not evaluate)."""
    statement = rule["Statement"]["ManagedRuleGroupStatement"]
    if set(rule["Statement"]) != {"ManagedRuleGroupStatement"}:
        raise LocalToolError(f"the local WAF cannot read rule {rule['Name']}")
    return f"{statement['VendorName']}/{statement['Name']}"


def _web_acl_of(association: dict[str, Any]) -> str:
    arn = association["Properties"]["WebACLArn"]
    if not (isinstance(arn, dict) and "Fn::GetAtt" in arn):
        raise LocalToolError("the local WAF needs the association to name the web ACL with !GetAtt")
    target = arn["Fn::GetAtt"]
    return str(target.split(".")[0] if isinstance(target, str) else target[0])


def _rate_rule(rule: dict[str, Any], bodies: dict[str, Any]) -> RateRule:
    statement = rule["Statement"].get("RateBasedStatement")
    if statement is None or set(rule["Statement"]) != {"RateBasedStatement"}:
        raise LocalToolError(
            f"the local WAF applies rate-based rules (and declares managed rule groups) only, not rule {rule['Name']}"
        )
    return RateRule(
        name=rule["Name"],
        limit=int(statement["Limit"]),
        window_s=int(statement.get("EvaluationWindowSec", 300)),
        key=_key(statement, rule["Name"]),
        applies=_scope(statement.get("ScopeDownStatement"), rule["Name"]),
        block=_block(rule, bodies),
    )


def _key(statement: dict[str, Any], name: str) -> Callable[[Mapping[str, str], str], str | None]:
    if statement["AggregateKeyType"] == "IP":
        return lambda headers, ip: ip
    keys = statement.get("CustomKeys", [])
    if statement["AggregateKeyType"] == "CUSTOM_KEYS" and len(keys) == 1 and set(keys[0]) == {"Header"}:
        header = keys[0]["Header"]["Name"].lower()
        return lambda headers, ip: headers.get(header)  # a request without the header is not counted
    raise LocalToolError(f"the local WAF cannot key rule {name} by {statement['AggregateKeyType']} {keys}")


def _scope(statement: dict[str, Any] | None, name: str) -> Callable[[Mapping[str, str]], bool]:
    if statement is None:
        return lambda headers: True
    negated = "NotStatement" in statement
    inner = statement["NotStatement"]["Statement"] if negated else statement
    size = inner.get("SizeConstraintStatement")
    if size is None or size["ComparisonOperator"] != "GT" or int(size["Size"]) != 0:
        raise LocalToolError(f"the local WAF cannot scope rule {name} by {statement}")
    header = size["FieldToMatch"]["SingleHeader"]["Name"].lower()
    return lambda headers: bool(headers.get(header)) != negated


def _block(rule: dict[str, Any], bodies: dict[str, Any]) -> Block:
    custom = rule["Action"].get("Block", {}).get("CustomResponse")
    if custom is None:  # WAF's own block: 403 with an empty body
        return Block(403, b"", "text/plain", {})
    body = bodies.get(custom.get("CustomResponseBodyKey"), {})
    content_type = {"APPLICATION_JSON": "application/json", "TEXT_HTML": "text/html"}.get(
        body.get("ContentType", ""), "text/plain"
    )
    headers = {header["Name"]: str(header["Value"]) for header in custom.get("ResponseHeaders", [])}
    return Block(int(custom["ResponseCode"]), str(body.get("Content", "")).encode(), content_type, headers)

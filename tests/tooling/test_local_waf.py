"""The local WAF's rate rules: counted per key over a sliding window, scoped, in the template's
priority order; AWS's managed rule groups declared and not evaluated; and refused at start when the
template asks for anything else it cannot apply."""

import pytest

from infra.local.deployment import LocalDeployment
from infra.local.errors import LocalToolError
from infra.local.waf import Block, LocalWaf, RateRule, _rate_rule, local_waf

BLOCK = Block(429, b"{}", "application/json", {"Retry-After": "60"})


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def rule(limit: int, window_s: int = 60) -> RateRule:
    return RateRule("r", limit, window_s, lambda headers, ip: headers.get("authorization"), lambda h: True, BLOCK)


def test_a_key_over_its_limit_is_blocked_until_its_window_passes() -> None:
    clock = Clock()
    waf = LocalWaf([rule(2)], clock)
    token = {"Authorization": "Bearer a"}
    assert [waf.check(token, "1.1.1.1") for _ in range(3)] == [None, None, BLOCK]
    assert waf.check({"Authorization": "Bearer b"}, "1.1.1.1") is None
    assert waf.check({}, "1.1.1.1") is None  # no key: not counted
    clock.now = 61
    assert waf.check(token, "1.1.1.1") is None


def test_the_templates_per_ip_rule_limits_a_flood_that_rotates_a_junk_token() -> None:
    """Each request carries a different Authorization header: the per-token rule never sees one
    twice, and the per-IP rule (the template's, first, no scope-down) counts them all."""
    clock = Clock()
    waf = local_waf(LocalDeployment(region="us-east-1", resources={}, parameters={"RequestsPerMinutePerIp": "5"}))
    assert waf is not None
    assert [rule.name for rule in waf.rules] == ["per-ip", "per-id-token"]  # in priority order
    waf = LocalWaf(waf.rules, clock)
    answers = [waf.check({"Authorization": f"Bearer junk-{n}"}, "1.1.1.1") for n in range(7)]
    assert [a is None for a in answers] == [True] * 5 + [False] * 2
    assert answers[-1] is not None
    assert answers[-1].status == 429
    assert waf.check({"Authorization": "Bearer junk-x"}, "2.2.2.2") is None  # another address is not


def test_managed_rule_groups_are_declared_and_not_evaluated() -> None:
    waf = local_waf(LocalDeployment(region="us-east-1", resources={}))
    assert waf is not None
    assert waf.not_evaluated == ("AWS/AWSManagedRulesCommonRuleSet", "AWS/AWSManagedRulesKnownBadInputsRuleSet")
    # No User-Agent: the core set's NoUserAgent_HEADER blocks it on AWS; here AWS's rules are not modelled.
    assert waf.check({"Authorization": "Bearer a"}, "1.1.1.1") is None


def test_a_rule_the_local_waf_cannot_apply_is_refused() -> None:
    matching = {"Name": "m", "Statement": {"ByteMatchStatement": {}}, "Action": {"Block": {}}}
    with pytest.raises(LocalToolError, match="rate-based rules"):
        _rate_rule(matching, {})
    geo = {"Name": "g", "Action": {"Block": {}},
           "Statement": {"RateBasedStatement": {"Limit": 10, "AggregateKeyType": "FORWARDED_IP"}}}  # fmt: skip
    with pytest.raises(LocalToolError, match="cannot key rule g"):
        _rate_rule(geo, {})

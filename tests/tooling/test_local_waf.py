"""The local WAF's rate rules: counted per key over a sliding window, scoped, and refused at start
when the template asks for what it cannot apply."""

import pytest

from infra.local.errors import LocalToolError
from infra.local.waf import Block, LocalWaf, RateRule, _rate_rule

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


def test_a_rule_the_local_waf_cannot_apply_is_refused() -> None:
    managed = {"Name": "m", "Statement": {"ManagedRuleGroupStatement": {}}, "Action": {"Block": {}}}
    with pytest.raises(LocalToolError, match="rate-based rules only"):
        _rate_rule(managed, {})
    geo = {"Name": "g", "Action": {"Block": {}},
           "Statement": {"RateBasedStatement": {"Limit": 10, "AggregateKeyType": "FORWARDED_IP"}}}  # fmt: skip
    with pytest.raises(LocalToolError, match="cannot key rule g"):
        _rate_rule(geo, {})

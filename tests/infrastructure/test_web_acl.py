"""The API stage's WAF web ACL in template.yaml, a test per rule: the per-IP rate counts every
request (a flood that rotates a junk Authorization header per request meets it as well), the per-token
rate counts each ID token, and AWS's managed common and known-bad-inputs groups are on, with the core
set's rules that read the body only counting, since legitimate bodies trip them. The same rate rules
over the local gateway: tests/integration/test_waf_over_local_gateway.py."""

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from infra.local.template import load_template, resource
from onboarding.config.settings import DEFAULT_LIMITS

pytestmark = pytest.mark.infrastructure

# AWSManagedRulesCommonRuleSet's SizeRestrictions_BODY blocks a body over 8 KB (AWS WAF developer
# guide, "Baseline rule groups"); a Twilio text is at most 1,600 characters.
CORE_SET_BODY_LIMIT = 8 * 1024
TWILIO_MAX_TEXT_CHARS = 1600
# The core set's rules that inspect the request body (the rest read headers, path, query or cookies).
CORE_SET_BODY_RULES = {
    "SizeRestrictions_BODY",
    "CrossSiteScripting_BODY",
    "GenericLFI_BODY",
    "GenericRFI_BODY",
    "EC2MetaDataSSRF_BODY",
}


def _rules() -> dict[str, dict[str, Any]]:
    return {rule["Name"]: rule for rule in resource("ApiWebAcl")["Properties"]["Rules"]}


def _managed(name: str) -> dict[str, Any]:
    [rule] = [
        rule for rule in _rules().values() if rule["Statement"].get("ManagedRuleGroupStatement", {}).get("Name") == name
    ]
    return rule


def _throttles(rule: dict[str, Any]) -> None:
    """Blocked with WAF's 429 in the API's error shape, and when to try again."""
    custom = rule["Action"]["Block"]["CustomResponse"]
    assert custom["ResponseCode"] == 429
    assert custom["ResponseHeaders"] == [{"Name": "Retry-After", "Value": "60"}]
    body = resource("ApiWebAcl")["Properties"]["CustomResponseBodies"][custom["CustomResponseBodyKey"]]
    assert set(json.loads(body["Content"])) == {"error", "message"}


def test_the_web_acl_guards_the_api_stage_unless_disabled() -> None:
    template = load_template()
    assert template["Parameters"]["WafRateLimiting"]["Default"] == "Enabled"
    acl = resource("ApiWebAcl")
    assert acl["Condition"] == "WafEnabled"
    assert acl["Properties"]["DefaultAction"] == {"Allow": {}}
    association = resource("ApiWebAclAssociation")["Properties"]
    assert association["WebACLArn"] == {"Fn::GetAtt": "ApiWebAcl.Arn"}
    assert "${ChatApi}/stages/${ChatApi.Stage}" in association["ResourceArn"]["Fn::Sub"]


def test_the_per_ip_rate_counts_every_request_whatever_its_authorization_header() -> None:
    """Counting only requests without an Authorization header, it would let a flood that sends a
    junk one, different each time, meet only the per-token rule, one fresh count per junk token."""
    rule = _rules()["per-ip"]
    statement = rule["Statement"]["RateBasedStatement"]
    assert statement["AggregateKeyType"] == "IP"
    assert "ScopeDownStatement" not in statement  # every request, token or not
    assert statement["Limit"] == {"Ref": "RequestsPerMinutePerIp"}
    assert statement["EvaluationWindowSec"] == 60
    # First: WAF stops at the first rule that blocks, and a rule after it would not count the request.
    assert rule["Priority"] == min(r["Priority"] for r in _rules().values())
    _throttles(rule)


def test_the_per_token_rate_counts_each_id_token() -> None:
    rule = _rules()["per-id-token"]
    statement = rule["Statement"]["RateBasedStatement"]
    assert statement["Limit"] == {"Ref": "ClientRequestsPerMinute"}
    assert statement["AggregateKeyType"] == "CUSTOM_KEYS"
    assert statement["CustomKeys"] == [
        {"Header": {"Name": "authorization", "TextTransformations": [{"Priority": 0, "Type": "NONE"}]}}
    ]
    _throttles(rule)


def test_the_core_rule_set_blocks_but_only_counts_what_reads_a_body() -> None:
    """The largest message the app accepts, and a long Twilio text, are legitimate bodies over the
    core set's 8 KB: blocked, the app's message would get WAF's 403 instead of its own answer, and
    a text would be lost without a reply. The other body rules would refuse free text a person may
    write (a link to an address, a path, markup); the body is stored and shown to the model, never
    rendered, opened or run. Everything else in the set blocks."""
    largest_message = json.dumps({"message": "a" * DEFAULT_LIMITS.max_message_bytes, "clientMessageId": "c" * 128})
    assert len(largest_message.encode()) > CORE_SET_BODY_LIMIT
    long_text = urlencode({"Body": "é" * TWILIO_MAX_TEXT_CHARS, "From": "+15551230001", "MessageSid": "SM" + "0" * 32})
    assert len(long_text.encode()) > CORE_SET_BODY_LIMIT
    rule = _managed("AWSManagedRulesCommonRuleSet")
    assert rule["OverrideAction"] == {"None": {}}  # the group's own actions, but for the overrides below
    statement = rule["Statement"]["ManagedRuleGroupStatement"]
    assert statement["VendorName"] == "AWS"
    overrides = {o["Name"]: o["ActionToUse"] for o in statement["RuleActionOverrides"]}
    assert overrides == {key: {"Count": {}} for key in CORE_SET_BODY_RULES}


def test_the_known_bad_inputs_group_blocks_as_aws_ships_it() -> None:
    """Log4j lookups, Java deserialization, localhost Host headers, exploitable paths: nothing a
    person types, so nothing of it is only counted."""
    rule = _managed("AWSManagedRulesKnownBadInputsRuleSet")
    assert rule["OverrideAction"] == {"None": {}}
    statement = rule["Statement"]["ManagedRuleGroupStatement"]
    assert statement["VendorName"] == "AWS"
    assert "RuleActionOverrides" not in statement


def test_each_rule_has_its_own_priority_and_metric() -> None:
    rules = list(_rules().values())
    assert len({rule["Priority"] for rule in rules}) == len(rules)
    metrics = [rule["VisibilityConfig"]["MetricName"]["Fn::Sub"] for rule in rules]
    assert len(set(metrics)) == len(rules)
    assert all(rule["VisibilityConfig"]["CloudWatchMetricsEnabled"] for rule in rules)

"""The deployed stack can be signed in to, is capped, and tells someone when it is unwell: asserted
on template.yaml as CloudFormation sees it, after the SAM transform."""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from functions.api.mobile_api.snapstart_hooks import AFTER_RESTORE_PATH, BEFORE_CHECKPOINT_PATH
from infra.local.template import load_template

REPO = Path(__file__).resolve().parents[2]
MODEL_FUNCTIONS = {"ApiFunction": "ApiReservedConcurrency", "SmsWorkerFunction": "SmsWorkerReservedConcurrency"}
FUNCTIONS = ("ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction")
SERVICE = "onboarding-memory"


def _resources(template: dict[str, Any]) -> dict[str, Any]:
    resources: dict[str, Any] = template["Resources"]
    return resources


def _condition(template: dict[str, Any], name: str, parameters: dict[str, str]) -> bool:
    """Evaluate one of the template's conditions for the given parameter values (Equals/Not/Or/And)."""

    def value(node: Any) -> Any:
        if isinstance(node, dict) and "Ref" in node:
            return parameters.get(node["Ref"], template["Parameters"].get(node["Ref"], {}).get("Default"))
        return node

    def evaluate(node: Any) -> bool:
        (function, arguments), *_ = node.items()
        if function == "Condition":
            return evaluate(template["Conditions"][arguments])
        if function == "Fn::Equals":
            return bool(str(value(arguments[0])) == str(value(arguments[1])))
        if function == "Fn::Not":
            return not evaluate(arguments[0])
        if function == "Fn::Or":
            return any(evaluate(argument) for argument in arguments)
        if function == "Fn::And":
            return all(evaluate(argument) for argument in arguments)
        raise AssertionError(f"unexpected condition function {function}")

    return evaluate(template["Conditions"][name])


def test_a_public_app_client_signs_in_and_the_pool_outlives_the_stack(transformed: dict[str, Any]) -> None:
    resources = _resources(transformed)
    pool, client = resources["UserPool"], resources["UserPoolClient"]
    # The table is retained; the accounts whose ids key its data must be too.
    assert pool["DeletionPolicy"] == pool["UpdateReplacePolicy"] == "Retain"
    assert client["Condition"] == pool["Condition"] == "CreateUserPool"
    properties = client["Properties"]
    assert properties["UserPoolId"] == {"Ref": "UserPool"}
    assert properties["GenerateSecret"] is False  # a mobile app cannot keep a secret
    assert set(properties["ExplicitAuthFlows"]) == {
        "ALLOW_USER_SRP_AUTH",
        "ALLOW_REFRESH_TOKEN_AUTH",
        "ALLOW_USER_PASSWORD_AUTH",  # docs/deploy.md's CLI sign-in
    }
    admin_only = pool["Properties"]["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"]
    assert admin_only == {"Fn::If": ["AllowSelfSignUp", False, True]}
    assert _condition(transformed, "AllowSelfSignUp", {}) is False  # by default only an administrator adds users
    assert _condition(transformed, "AllowSelfSignUp", {"SelfSignUp": "true"}) is True
    outputs = transformed["Outputs"]
    assert {"ApiUrl", "UserPoolId", "UserPoolClientId"} <= set(outputs)
    assert outputs["UserPoolClientId"]["Value"] == {"Ref": "UserPoolClient"}
    assert outputs["UserPoolId"]["Value"]["Fn::If"][1] == {"Ref": "UserPool"}


def test_the_adapter_takes_part_in_snapstart_and_relays_its_hooks_to_the_app() -> None:
    template = load_template()
    version = template["Parameters"]["LambdaWebAdapterVersion"]
    # Layer 30 is adapter release 1.1.0 with the final SnapStart support (docs/decisions/0016).
    assert version["Default"] >= 30
    assert version["MinValue"] >= 30
    properties = template["Resources"]["ApiFunction"]["Properties"]
    variables = properties["Environment"]["Variables"]
    assert variables["AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"] == BEFORE_CHECKPOINT_PATH
    assert variables["AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"] == AFTER_RESTORE_PATH
    routes = {event["Properties"]["Path"] for event in properties["Events"].values()}
    assert not routes & {BEFORE_CHECKPOINT_PATH, AFTER_RESTORE_PATH}  # not reachable through API Gateway


def test_the_stage_is_throttled_by_parameters(transformed: dict[str, Any]) -> None:
    [stage] = [body for body in _resources(transformed).values() if body["Type"] == "AWS::ApiGateway::Stage"]
    [settings] = stage["Properties"]["MethodSettings"]
    assert (settings["ResourcePath"], settings["HttpMethod"]) == ("/*", "*")  # every route of the stage
    assert settings["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}
    assert settings["ThrottlingBurstLimit"] == {"Ref": "ApiThrottlingBurstLimit"}


@pytest.mark.parametrize(("function", "parameter"), sorted(MODEL_FUNCTIONS.items()))
def test_the_model_calling_functions_reserve_concurrency_as_told(
    transformed: dict[str, Any],
    function: str,
    parameter: str,
) -> None:
    reserved = _resources(transformed)[function]["Properties"]["ReservedConcurrentExecutions"]
    condition, when_set, otherwise = reserved["Fn::If"]
    assert (when_set, otherwise) == ({"Ref": parameter}, {"Ref": "AWS::NoValue"})
    # Empty or 0 leaves the function unreserved (a reservation of 0 would stop it altogether).
    assert [_condition(transformed, condition, {parameter: v}) for v in ("", "0", "25")] == [False, False, True]
    # The API is reserved by default, sized in docs/capacity.md; the worker is capped by its queue mapping.
    assert transformed["Parameters"][parameter]["Default"] == ("150" if function == "ApiFunction" else "")


def test_the_queue_mapping_caps_the_worker_and_a_failing_text_holds_its_group_for_minutes(
    transformed: dict[str, Any],
) -> None:
    resources = _resources(transformed)
    [mapping] = [
        body
        for body in resources.values()
        if body["Type"] == "AWS::Lambda::EventSourceMapping"
        and "SmsQueue" in json.dumps(body["Properties"]["EventSourceArn"])
    ]
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "SmsMaxConcurrency"}}
    queue = resources["SmsQueue"]["Properties"]
    receives = queue["RedrivePolicy"]["maxReceiveCount"]
    assert receives == {"Ref": "SmsMaxReceiveCount"}
    worst = queue["VisibilityTimeout"] * transformed["Parameters"]["SmsMaxReceiveCount"]["Default"]
    assert worst <= 3600, "a failing text would hold its sender's later texts back for over an hour"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_function_logs_to_a_group_of_its_own_with_the_retention_parameter(
    transformed: dict[str, Any],
    function: str,
) -> None:
    resources = _resources(transformed)
    group_id = resources[function]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    group = resources[group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert group.get("Condition") == resources[function].get("Condition")
    assert 30 in transformed["Parameters"]["LogRetentionDays"]["AllowedValues"]


def _alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: body for name, body in _resources(template).items() if body["Type"] == "AWS::CloudWatch::Alarm"}


def _dimensions(alarm: dict[str, Any]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in alarm["Properties"]["Dimensions"]}


def test_the_alarms_cover_what_pages_someone_and_notify_one_topic(transformed: dict[str, Any]) -> None:
    alarms = _alarms(transformed)
    watched = {(a["Properties"]["Namespace"], a["Properties"]["MetricName"]) for a in alarms.values()}
    assert {
        ("OnboardingMemory", "ModelCircuitOpened"),
        ("OnboardingMemory", "HistoryLoadFailed"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
        ("AWS/ApiGateway", "5XXError"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/Bedrock", "InvocationThrottles"),
    } <= watched
    for name, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}], name
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching", name
    for function in FUNCTIONS:
        for metric in ("Errors", "Throttles"):
            [alarm] = [
                a
                for a in alarms.values()
                if a["Properties"]["MetricName"] == metric and _dimensions(a).get("FunctionName") == {"Ref": function}
            ]
            assert alarm.get("Condition") == _resources(transformed)[function].get("Condition")
    by_metric = {a["Properties"]["MetricName"]: a for a in alarms.values()}
    assert _dimensions(by_metric["InvocationThrottles"]) == {"ModelId": {"Ref": "BedrockModelId"}}
    assert _dimensions(by_metric["ApproximateNumberOfMessagesVisible"]) == {
        "QueueName": {"Fn::GetAtt": ["SmsDeadLetterQueue", "QueueName"]}
    }
    api = _dimensions(by_metric["5XXError"])
    assert api["ApiName"] == _resources(transformed)["ChatApi"]["Properties"]["Name"]
    assert _dimensions(by_metric["ModelCircuitOpened"]) == {"service": SERVICE}
    for function in FUNCTIONS:  # the dimension our metrics carry
        variables = _resources(transformed)[function]["Properties"]["Environment"]["Variables"]
        assert variables["POWERTOOLS_SERVICE_NAME"] == SERVICE
    subscription = _resources(transformed)["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Endpoint"] == {"Ref": "AlarmEmail"}
    assert _condition(transformed, "HasAlarmEmail", {}) is False


def test_the_alarmed_metrics_of_our_namespace_are_emitted_by_the_code(transformed: dict[str, Any]) -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "layers/onboarding/onboarding").rglob("*.py"))
    for alarm in _alarms(transformed).values():
        if alarm["Properties"]["Namespace"] == "OnboardingMemory":
            assert f'count_metric("{alarm["Properties"]["MetricName"]}")' in source


def _dashboard(template: dict[str, Any], sms: bool) -> dict[str, Any]:
    """The dashboard's JSON as CloudFormation would render it, with or without the SMS channel."""

    def render(node: Any) -> str:
        if isinstance(node, str):
            return node
        if "Fn::Sub" in node:
            return re.sub(r"\$\{[^}]+\}", "x", node["Fn::Sub"])
        if "Fn::If" in node:
            assert node["Fn::If"][0] == "SmsEnabled"
            return render(node["Fn::If"][1 if sms else 2])
        if "Fn::Join" in node:
            separator, parts = node["Fn::Join"]
            return str(separator).join(render(part) for part in parts)
        raise AssertionError(f"unexpected {node}")

    body: dict[str, Any] = json.loads(render(_resources(template)["Dashboard"]["Properties"]["DashboardBody"]))
    return body


@pytest.mark.parametrize("sms", [True, False])
def test_the_dashboard_shows_turns_latency_tokens_and_errors_by_kind(
    transformed: dict[str, Any],
    sms: bool,
) -> None:
    widgets = _dashboard(transformed, sms)["widgets"]
    lines = [line for widget in widgets for line in widget["properties"]["metrics"]]
    ours = {
        (line[1], (line[4] if len(line) > 4 else {}).get("stat")) for line in lines if line[0] == "OnboardingMemory"
    }
    assert ("TurnCompleted", None) in ours
    for latency in ("FirstTokenLatency", "TurnLatency"):
        assert {(latency, "p50"), (latency, "p99")} <= ours
    assert {("InputTokens", None), ("OutputTokens", None)} <= ours
    expressions = [line[0]["expression"] for line in lines if isinstance(line[0], dict)]
    assert any("TurnFailed" in e and "kind" in e for e in expressions)  # failed turns, one line per kind
    for line in lines:
        if line[0] == "OnboardingMemory":
            assert line[2:4] == ["service", SERVICE]
    assert any("SMS" in widget["properties"]["title"] for widget in widgets) is sms

"""template.yaml and packaging: lint-clean, every handler where the template says, the layer pinned."""

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.local.template import function_handler, load_template, module_file, resource, web_adapter_app
from onboarding.config import Settings

REPO = Path(__file__).resolve().parents[2]


def test_cfn_lint_is_clean() -> None:
    completed = subprocess.run(  # noqa: S603
        [str(Path(sys.executable).parent / "cfn-lint"), "template.yaml"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.skipif(shutil.which("sam") is None, reason="SAM CLI is not installed (.ci/run installs it)")
def test_sam_validate_lint_is_clean() -> None:
    completed = subprocess.run(
        ["sam", "validate", "--lint"],  # noqa: S607 - the SAM CLI on PATH
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def _functions() -> list[str]:
    resources = load_template()["Resources"]
    return [name for name, resource in resources.items() if resource["Type"] == "AWS::Serverless::Function"]


@pytest.mark.parametrize("logical_id", _functions())
def test_every_function_handler_exists(logical_id: str) -> None:
    located = web_adapter_app(logical_id)
    if located is None:
        code_dir, module, name = function_handler(logical_id)
    else:
        code_dir, module, name = located
        script = code_dir / resource(logical_id)["Properties"]["Handler"]
        assert os.access(script, os.X_OK), f"{script.name} must be executable for the adapter to start it"
    source = module_file(code_dir, module).read_text(encoding="utf-8")
    assert re.search(rf"^{name} = |^def {name}\(", source, re.MULTILINE)


def test_functions_run_python_3_13_behind_a_regional_rest_api() -> None:
    template = load_template()
    assert template["Globals"]["Function"]["Runtime"] == "python3.13"
    api = template["Resources"]["ChatApi"]
    assert api["Type"] == "AWS::Serverless::Api"
    assert api["Properties"]["EndpointConfiguration"]["Type"] == "REGIONAL"


PACKAGES = {
    "layers/onboarding/requirements.txt": (
        "aws-lambda-powertools",
        "boto3",
        "pydantic",
        "langchain-core",
        "langchain-aws",
    ),
    "layers/twilio/requirements.txt": ("twilio", "cryptography"),
    "functions/api/requirements.txt": ("fastapi", "uvicorn", "starlette"),
}


@pytest.mark.parametrize("path", sorted(PACKAGES))
def test_each_package_pins_exactly_what_the_tests_run_with(path: str) -> None:
    """Each requirements.txt SAM builds from is exported from uv.lock; the test venv is synced from it."""
    lines = (REPO / path).read_text().splitlines()
    pinned = {m[1]: m[2] for line in lines if (m := re.match(r"^([A-Za-z0-9_.-]+)==([^ ;]+)", line))}
    for name in PACKAGES[path]:
        assert pinned[name] == importlib.metadata.version(name), name


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
def test_the_exported_requirements_are_current(tmp_path: Path) -> None:
    """infra/export_requirements.sh regenerates them; a stale copy would ship other versions than the lock."""
    before = {path: (REPO / path).read_text() for path in PACKAGES}
    subprocess.run(["sh", "infra/export_requirements.sh"], cwd=REPO, check=True, capture_output=True)  # noqa: S607
    after = {path: (REPO / path).read_text() for path in PACKAGES}
    assert after == before


def test_the_sms_webhook_never_imports_langchain() -> None:
    """Its cold start is inside Twilio's 15-second budget; LangChain alone costs over a second."""
    probe = (
        "import sys; from infra.local.lambda_runner import _load_module;"
        "from infra.local.template import function_handler;"
        "code_dir, module, _ = function_handler('SmsWebhookFunction');"
        "_load_module('SmsWebhookFunction', code_dir, module);"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(('langchain', 'langsmith', 'numpy'))}))"
    )
    completed = subprocess.run(  # noqa: S603
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=False, timeout=60
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "[]"


def test_the_mobile_api_streams_through_lambda_web_adapter_on_every_route() -> None:
    properties = resource("ApiFunction")["Properties"]
    variables = properties["Environment"]["Variables"]
    assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert variables["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert "LambdaAdapterLayerArm64" in json.dumps(properties["Layers"])
    # Buffered routes would hand API Gateway the adapter's stream prelude as a proxy response.
    assert {e["Properties"]["ResponseTransferMode"] for e in properties["Events"].values()} == {"RESPONSE_STREAM"}


def test_the_sms_queue_is_fifo_with_a_fifo_dead_letter_queue() -> None:
    queue = resource("SmsQueue")["Properties"]
    dead_letters = resource("SmsDeadLetterQueue")["Properties"]
    assert queue["FifoQueue"] is True
    assert dead_letters["FifoQueue"] is True
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": "SmsDeadLetterQueue.Arn"}
    worker_timeout = resource("SmsWorkerFunction")["Properties"]["Timeout"]
    assert queue["VisibilityTimeout"] >= 6 * worker_timeout
    events = resource("SmsWorkerFunction")["Properties"]["Events"]
    assert events["Texts"]["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


@pytest.mark.parametrize("logical_id", _functions())
def test_policies_name_actions_and_resources_no_wildcard_services(logical_id: str) -> None:
    for statement in resource(logical_id)["Properties"]["Policies"][0]["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all(not action.endswith(":*") and action != "*" for action in actions), statement
        assert statement["Resource"] != "*", statement


def test_only_the_webhook_route_skips_the_cognito_authorizer() -> None:
    unauthenticated = [
        (logical_id, event["Properties"]["Path"])
        for logical_id in _functions()
        for event in resource(logical_id)["Properties"].get("Events", {}).values()
        if event["Type"] == "Api" and event["Properties"].get("Auth", {}).get("Authorizer") == "NONE"
    ]
    assert unauthenticated == [("SmsWebhookFunction", "/sms")]


@pytest.mark.parametrize("logical_id", ["ApiFunction", "SmsWorkerFunction"])
def test_bedrock_is_invoked_only_on_the_configured_model_or_through_its_profile(logical_id: str) -> None:
    statements = resource(logical_id)["Properties"]["Policies"][0]["Statement"]
    bedrock = [s for s in statements if any(str(a).startswith("bedrock:") for a in s["Action"])]
    for statement in bedrock:
        resources = json.dumps(statement["Resource"])
        assert "${BedrockModelId}" in resources or "InferenceProfileArn" in json.dumps(statement.get("Condition", {}))
    assert len(bedrock) == 2


def test_the_sms_webhook_cannot_call_the_model() -> None:
    statements = resource("SmsWebhookFunction")["Properties"]["Policies"][0]["Statement"]
    assert not [s for s in statements if "bedrock" in json.dumps(s["Action"])]


def _references(node: Any) -> set[str]:
    """Logical ids a template fragment refers to (Ref, Fn::GetAtt, ${...} in Fn::Sub)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                found.add(value.split(".")[0] if isinstance(value, str) else value[0])
            elif key == "Fn::Sub":
                text = value if isinstance(value, str) else value[0]
                found |= {name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text)}
                found |= _references(value[1] if isinstance(value, list) else None)
            else:
                found |= _references(value)
    elif isinstance(node, list):
        for item in node:
            found |= _references(item)
    return found


def test_the_deployed_template_has_no_dependency_cycle(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    edges = {
        name: (_references(body) | set(body.get("DependsOn", []) if isinstance(body.get("DependsOn"), list)
               else [body["DependsOn"]] if "DependsOn" in body else [])) & set(resources)
        for name, body in resources.items()
    }  # fmt: skip
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(edges[name]):
            if state.get(target) == "open":
                raise AssertionError("circular dependency: " + " -> ".join([*path, name, target]))
            if target not in state:
                visit(target, [*path, name])
        state[name] = "done"

    for name in sorted(resources):
        if name not in state:
            visit(name, [])


def test_every_mobile_api_route_integrates_through_response_streaming(transformed: dict[str, Any]) -> None:
    paths = transformed["Resources"]["ChatApi"]["Properties"]["Body"]["paths"]
    for path in ("/chat", "/history", "/phone-links", "/phones", "/me"):
        for operation in paths[path].values():
            integration = operation["x-amazon-apigateway-integration"]
            assert integration["responseTransferMode"] == "STREAM", path
            assert "response-streaming-invocations" in json.dumps(integration["uri"]), path


def test_the_sms_channel_exists_only_once_a_twilio_account_is_given() -> None:
    """Without an account the worker could not send; the stack then deploys the mobile API alone."""
    template = load_template()
    assert template["Conditions"]["SmsEnabled"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "TwilioAccountSid"}, ""]}]}
    for logical_id in ("SmsWebhookFunction", "SmsWorkerFunction", "SmsQueue", "SmsDeadLetterQueue", "IdempotencyTable"):
        assert resource(logical_id)["Condition"] == "SmsEnabled", logical_id


@pytest.mark.parametrize("logical_id", ["ApiFunction", "SmsWorkerFunction"])
def test_model_retries_end_well_inside_the_functions_timeout(logical_id: str) -> None:
    """Retries before the first token stop starting after their budget; with one more try's connect
    time and the first token, the turn still has time left to stream and store the reply."""
    settings = Settings(table_name="t-1")
    timeout = resource(logical_id)["Properties"].get("Timeout") or load_template()["Globals"]["Function"]["Timeout"]
    assert settings.model_retry_budget_s + settings.model_connect_timeout_s <= timeout / 2


def test_snapstart_restores_the_model_calling_functions_through_their_alias(transformed: dict[str, Any]) -> None:
    """SnapStart snapshots published versions only: the API's routes and the queue's mapping must
    call the alias (which points at a published version), or every call would be a plain cold start."""
    resources = transformed["Resources"]
    for function in ("ApiFunction", "SmsWorkerFunction"):
        assert resources[function]["Properties"]["SnapStart"] == {"ApplyOn": {"Ref": "SnapStart"}}, function
        assert resources[f"{function}Aliaslive"]["Type"] == "AWS::Lambda::Alias", function
    assert "SnapStart" not in resources["SmsWebhookFunction"]["Properties"]  # no model: kept lean instead
    paths = resources["ChatApi"]["Properties"]["Body"]["paths"]
    for path in ("/chat", "/history", "/me"):
        for operation in paths[path].values():
            assert "ApiFunctionAliaslive" in _references(operation["x-amazon-apigateway-integration"]["uri"]), path
    mappings = [
        body
        for body in resources.values()
        if body["Type"] == "AWS::Lambda::EventSourceMapping"
        and "SmsQueue" in _references(body["Properties"]["EventSourceArn"])
    ]
    assert mappings
    for mapping in mappings:
        assert _references(mapping["Properties"]["FunctionName"]) == {"SmsWorkerFunctionAliaslive"}
    assert load_template()["Parameters"]["SnapStart"]["Default"] == "PublishedVersions"


# --- the memory's feature flags -------------------------------------------------------

TURN_FUNCTIONS = ("ApiFunction", "SmsWorkerFunction")


def test_the_flags_profile_is_freeform_and_its_first_version_holds_the_documented_defaults() -> None:
    from tests.support.views import default_flags_document

    profile = resource("FeatureFlagsProfile")["Properties"]
    assert (profile["Type"], profile["LocationUri"]) == ("AWS.Freeform", "hosted")
    version = resource("FeatureFlagsDefaults")["Properties"]
    assert version["ContentType"] == "application/json"
    assert json.loads(version["Content"]) == default_flags_document()
    deployment = resource("FeatureFlagsDeployment")["Properties"]
    assert deployment["ConfigurationVersion"] == {"Ref": "FeatureFlagsDefaults"}
    assert deployment["DeploymentStrategyId"] == {"Ref": "FeatureFlagsDeploymentStrategy"}
    assert deployment["EnvironmentId"] == {"Ref": "FeatureFlagsEnvironment"}


@pytest.mark.parametrize("logical_id", TURN_FUNCTIONS)
def test_the_functions_that_run_turns_name_the_flags_and_may_read_them(logical_id: str) -> None:
    properties = resource(logical_id)["Properties"]
    variables = properties["Environment"]["Variables"]
    assert variables["FEATURE_FLAGS_APPLICATION"] == {"Ref": "FeatureFlagsApplication"}
    assert variables["FEATURE_FLAGS_ENVIRONMENT"] == {"Ref": "FeatureFlagsEnvironment"}
    assert variables["FEATURE_FLAGS_PROFILE"] == {"Ref": "FeatureFlagsProfile"}
    # The names the template gives are names Settings reads.
    assert {"FEATURE_FLAGS_APPLICATION", "FEATURE_FLAGS_ENVIRONMENT", "FEATURE_FLAGS_PROFILE"} <= set(
        Settings.env_names().values()
    )
    [statement] = [s for s in properties["Policies"][0]["Statement"] if s["Sid"] == "ReadFeatureFlags"]
    assert sorted(statement["Action"]) == ["appconfig:GetLatestConfiguration", "appconfig:StartConfigurationSession"]
    arn = statement["Resource"]["Fn::Sub"]
    assert arn.endswith(
        "application/${FeatureFlagsApplication}/environment/${FeatureFlagsEnvironment}"
        "/configuration/${FeatureFlagsProfile}"
    )


def test_a_flags_deployment_rolls_back_on_api_5xx_and_flags_unavailable_pages_someone() -> None:
    monitors = resource("FeatureFlagsEnvironment")["Properties"]["Monitors"]
    assert [m["AlarmArn"] for m in monitors] == [{"Fn::GetAtt": "Api5xxAlarm.Arn"}]
    role = resource("FeatureFlagsMonitorRole")["Properties"]
    [statement] = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "appconfig.amazonaws.com"}
    [policy] = role["Policies"]
    assert [s["Action"] for s in policy["PolicyDocument"]["Statement"]] == ["cloudwatch:DescribeAlarms"]
    alarm = resource("FeatureFlagsUnavailableAlarm")["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("OnboardingMemory", "FeatureFlagsUnavailable")


def test_the_mobile_api_reserves_its_concurrency_by_default() -> None:
    parameter = load_template()["Parameters"]["ApiReservedConcurrency"]
    assert int(parameter["Default"]) > 0
    assert resource("ApiFunction")["Properties"]["ReservedConcurrentExecutions"]["Fn::If"][0] == "ReserveApiConcurrency"

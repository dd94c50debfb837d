"""What only a deploy would show, checked here: each function's role is what the local stack
enforces (the SAM translator's own output), every variable a function reads is set for it by
template.yaml or has a documented default, and every table, queue, parameter or profile it names
comes from the template."""

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from infra.local.deployment import LocalDeployment
from infra.local.iam.roles import attached_managed_policies, managed_policy_arn
from infra.local.template import function_handler, load_template, module_file, web_adapter_app
from onboarding import config

REPO = Path(__file__).resolve().parents[2]
CONFIGURATION_DOC = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")


def _functions() -> list[str]:
    return [name for name, body in load_template()["Resources"].items() if body["Type"] == "AWS::Serverless::Function"]


def _template_variables(logical_id: str) -> dict[str, Any]:
    template = load_template()
    globals_ = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    own = template["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    return {**globals_, **own}


def _settings_read_by(logical_id: str) -> list[type[Any]]:
    """The settings classes the function's handler reads (`X.from_env()` in its module)."""
    located = web_adapter_app(logical_id)  # an adapter function's handler is its start-up script
    code_dir, module, _ = located if located is not None else function_handler(logical_id)
    tree = ast.parse(module_file(code_dir, module).read_text(encoding="utf-8"))
    names = {
        node.func.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "from_env"
        and isinstance(node.func.value, ast.Name)
    }
    assert names, f"{logical_id} reads no settings?"
    return [getattr(config, name) for name in sorted(names)]


def _read_variables(logical_id: str) -> dict[str, bool]:
    """Each variable the function reads, and whether its setting is required (has no default)."""
    return {
        variable: settings.model_fields[field].is_required()
        for settings in _settings_read_by(logical_id)
        for field, variable in settings.env_names().items()
    }


@pytest.mark.parametrize("logical_id", _functions())
def test_every_variable_a_function_reads_is_set_for_it_or_has_a_documented_default(logical_id: str) -> None:
    declared = _template_variables(logical_id)
    for variable, required in _read_variables(logical_id).items():
        if variable in declared:
            continue
        assert not required, f"{logical_id} needs {variable}, which template.yaml does not set for it"
        assert f"`{variable}`" in CONFIGURATION_DOC, f"{variable}'s default is not documented in docs/configuration.md"


def _names_a_resource(value: Any) -> bool:
    """The template value is one of its resources or parameters (Ref, GetAtt, or within a Sub)."""
    template = load_template()
    names = set(template["Resources"]) | set(template.get("Parameters", {})) | {"AWS::StackName"}
    text = repr(value) if isinstance(value, dict) else ""
    return any(re.search(rf"[{{'\s.]{re.escape(name)}[}}'.]", text) for name in names)


# Settings that name a table, a queue, a parameter, a flags profile or the model: each is one of
# the template's resources (or its parameter), never a default in code.
RESOURCE_SETTING = re.compile(
    r"(table_name|queue_url|_parameter|feature_flags_(application|environment|profile)|model_id)$"
)


def _resource_variables(logical_id: str) -> set[str]:
    return {
        variable
        for settings in _settings_read_by(logical_id)
        for field, variable in settings.env_names().items()
        if RESOURCE_SETTING.search(field)
    }


@pytest.mark.parametrize("logical_id", _functions())
def test_every_resource_a_function_names_comes_from_the_template(logical_id: str) -> None:
    declared = _template_variables(logical_id)
    for variable in _resource_variables(logical_id):
        if variable not in declared and (
            variable.startswith("FEATURE_FLAGS_") or variable == "TWILIO_WEBHOOK_URL_PARAMETER"
        ):
            continue  # optional: without the flags, the documented defaults; the URL may be given instead
        assert variable in declared, f"{logical_id} reads {variable} and is not told it by template.yaml"
        assert _names_a_resource(declared[variable]), f"{logical_id}'s {variable} is a literal, not a resource"


def test_no_code_names_an_aws_resource_itself() -> None:
    for folder in (REPO / "layers" / "onboarding" / "onboarding", REPO / "functions"):
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"arn:aws[a-z-]*:", text), f"{path} names an ARN"
            assert not re.search(r"https://sqs\.", text), f"{path} names a queue"


def test_a_resource_name_read_only_by_default_would_fail_the_check() -> None:
    """The check above is not vacuous: the table's name is one of the variables it holds to it."""
    assert _read_variables("ApiFunction")["TABLE_NAME"] is True
    assert {"TABLE_NAME", "BEDROCK_MODEL_ID"} <= _resource_variables("ApiFunction")
    assert _names_a_resource(_template_variables("ApiFunction")["TABLE_NAME"])
    assert not _names_a_resource("onboarding-memory")


def test_each_function_s_role_is_what_the_local_stack_enforces(transformed: dict[str, Any]) -> None:
    """The managed policies SAM attaches and the inline statements, as the SAM translator makes
    them, are those infra/local/iam/roles.py reads (so local enforcement is the deployed role)."""
    deployment = LocalDeployment("us-east-1", {})
    resources = transformed["Resources"]
    for logical_id in _functions():
        role = resources[f"{logical_id}Role"]["Properties"]
        deployed = {
            arn if isinstance(arn, str) else arn["Fn::Sub"].replace("${AWS::Partition}", "aws")
            for arn in role["ManagedPolicyArns"]
        }
        assert deployed == {managed_policy_arn(name) for name in attached_managed_policies(deployment, logical_id)}
        inline = [statement for policy in role["Policies"] for statement in policy["PolicyDocument"]["Statement"]]
        written = load_template()["Resources"][logical_id]["Properties"]["Policies"][0]["Statement"]
        assert [(s["Sid"], s["Action"]) for s in inline] == [(s["Sid"], s["Action"]) for s in written]

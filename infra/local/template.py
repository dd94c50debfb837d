"""Read template.yaml, so the local stack builds its table and finds handlers exactly as SAM would."""

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = REPO_ROOT / "template.yaml"


class _CloudFormationLoader(yaml.SafeLoader):
    """A YAML loader that keeps CloudFormation's short-form intrinsics (`!Ref`, `!GetAtt`, ...)."""


def _intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:
        raise yaml.constructor.ConstructorError(None, None, f"unexpected node for !{tag_suffix}", node.start_mark)
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _intrinsic)


@cache
def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        document = yaml.load(handle, Loader=_CloudFormationLoader)  # noqa: S506  # nosec B506 - a SafeLoader subclass
    if not isinstance(document, dict):
        raise ValueError(f"{path} is not a template")
    return document


def resource(logical_id: str) -> dict[str, Any]:
    resources: dict[str, dict[str, Any]] = load_template()["Resources"]
    if logical_id not in resources:
        raise KeyError(f"template.yaml has no resource {logical_id!r}; it has {sorted(resources)}")
    return resources[logical_id]


def function_ids() -> list[str]:
    """The logical ids of the template's functions, in the template's order."""
    resources: dict[str, dict[str, Any]] = load_template()["Resources"]
    return [name for name, body in resources.items() if body.get("Type") == "AWS::Serverless::Function"]


def table_create_request(logical_id: str, table_name: str) -> dict[str, Any]:
    """`CreateTable` arguments for a table resource: the template's keys and stream, billing on demand."""
    properties = resource(logical_id)["Properties"]
    request = {
        "TableName": table_name,
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if stream := properties.get("StreamSpecification"):
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return request


def function_handler(logical_id: str) -> tuple[Path, str, str]:
    """(code directory, module name, function name) of a function resource."""
    properties = resource(logical_id)["Properties"]
    module, _, function = properties["Handler"].rpartition(".")
    return REPO_ROOT / properties["CodeUri"], module, function


def web_adapter_app(logical_id: str) -> tuple[Path, str, str] | None:
    """(code directory, module, attribute) of the ASGI app a Lambda Web Adapter function serves,
    read from its start-up script (`... uvicorn ... module:attribute`); None for other functions."""
    properties = resource(logical_id)["Properties"]
    if not str(properties["Handler"]).endswith(".sh"):
        return None
    code_dir = REPO_ROOT / properties["CodeUri"]
    script = (code_dir / properties["Handler"]).read_text(encoding="utf-8")
    match = re.search(r"uvicorn\b.*?\s([A-Za-z_][\w.]*):([A-Za-z_]\w*)\s*$", script, re.MULTILINE)
    if match is None:
        raise ValueError(f"{logical_id}'s {properties['Handler']} does not start an ASGI app with uvicorn")
    return code_dir, match[1], match[2]


def module_file(code_dir: Path, module: str) -> Path:
    """The source file of `module` (a dotted name for a module in a package, the API's
    `mobile_api.app`) under a function's code directory."""
    return code_dir.joinpath(*module.split(".")).with_suffix(".py")


def _function_number(logical_id: str, name: str) -> int:
    """A function's `name` property, or the template's `Globals.Function` one it inherits."""
    properties = resource(logical_id)["Properties"]
    globals_: dict[str, Any] = load_template().get("Globals", {}).get("Function", {})
    value = properties.get(name, globals_.get(name))
    if not isinstance(value, int):
        raise ValueError(f"{logical_id} has no {name} in template.yaml, nor does Globals.Function")
    return value


def function_memory_mb(logical_id: str) -> int:
    return _function_number(logical_id, "MemorySize")


def function_timeout_s(logical_id: str) -> int:
    return _function_number(logical_id, "Timeout")


def function_architecture(logical_id: str) -> str:
    properties = resource(logical_id)["Properties"]
    globals_: dict[str, Any] = load_template().get("Globals", {}).get("Function", {})
    architectures = properties.get("Architectures", globals_.get("Architectures", ["x86_64"]))
    return str(architectures[0])


def table_ttl_attribute(logical_id: str) -> str | None:
    """The attribute a table's TTL reads, if TTL is enabled."""
    specification = resource(logical_id)["Properties"].get("TimeToLiveSpecification") or {}
    return specification.get("AttributeName") if specification.get("Enabled") else None

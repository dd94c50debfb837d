"""Owns what `sam deploy` would make of template.yaml, made locally: the parameter values, which
conditions hold, each resource's physical id and attributes, and the value of an intrinsic function
(`Ref`, `Fn::GetAtt`, `Fn::Sub`, `Fn::If`, `Fn::Join`, `Fn::Select`; `Fn::Equals`, `Fn::Not`,
`Fn::Or`, `Fn::And` and `Condition` in conditions) with the local account and region.

The local stack makes the resources (infra/local/stack.py) and says what they are called here;
this reads the rest from the template, so a function's environment and its policy come out exactly
as CloudFormation would resolve them. A reference to a resource the local stack does not make is
an error that names it, never a guess.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.local.template import TEMPLATE_PATH, load_template

LOCAL_ACCOUNT_ID = "123456789012"  # moto's default account: the ARNs of its queues carry it
LOCAL_STACK_NAME = "onboarding-memory-local"
_NO_VALUE = object()  # AWS::NoValue: the property is left out
_SUB_REFERENCE = re.compile(r"\$\{([^}]+)\}")


class UnresolvableError(ValueError):
    """The template names something the local deployment does not have."""


@dataclass(frozen=True)
class LocalResource:
    """A resource the local stack made: what `Ref` gives, and its `Fn::GetAtt` attributes."""

    ref: str
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalDeployment:
    region: str
    resources: Mapping[str, LocalResource]
    parameters: Mapping[str, str] = field(default_factory=dict)  # on top of the template's defaults
    account: str = LOCAL_ACCOUNT_ID
    stack_name: str = LOCAL_STACK_NAME
    partition: str = "aws"
    template_path: Path = TEMPLATE_PATH

    @property
    def template(self) -> dict[str, Any]:
        return load_template(self.template_path)

    def parameter(self, name: str) -> str:
        if name in self.parameters:
            return self.parameters[name]
        declared = self.template.get("Parameters", {}).get(name)
        if declared is None:
            raise UnresolvableError(f"template.yaml has no parameter {name}")
        return str(declared.get("Default", ""))

    def _pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::Partition": self.partition,
            "AWS::StackName": self.stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }.get(name)

    def _ref(self, name: str) -> str:
        pseudo = self._pseudo(name)
        if pseudo is not None:
            return pseudo
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        if name in self.resources:
            return self.resources[name].ref
        raise UnresolvableError(f"the local stack has no stand-in for {name} (Ref)")

    def _attribute(self, logical_id: str, attribute: str) -> str:
        resource = self.resources.get(logical_id)
        if resource is None or attribute not in resource.attributes:
            raise UnresolvableError(f"the local stack has no stand-in for {logical_id}.{attribute} (Fn::GetAtt)")
        return resource.attributes[attribute]

    def condition(self, name: str) -> bool:
        conditions = self.template.get("Conditions", {})
        if name not in conditions:
            raise UnresolvableError(f"template.yaml has no condition {name}")
        return bool(self._condition(conditions[name]))

    def _condition(self, node: Any) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Fn::Equals":
                left, right = (self.resolve(value) for value in argument)
                return str(left) == str(right)
            if function == "Fn::Not":
                return not self._condition(argument[0])
            if function == "Fn::Or":
                return any(self._condition(value) for value in argument)
            if function == "Fn::And":
                return all(self._condition(value) for value in argument)
            if function == "Condition":
                return self.condition(argument)
        raise UnresolvableError(f"a condition the local deployment cannot evaluate: {node!r}")

    def resolve(self, node: Any) -> Any:
        """`node` with every intrinsic function replaced by its value (AWS::NoValue drops a key or item)."""
        value = self._resolve(node)
        return None if value is _NO_VALUE else value

    def _resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [value for value in (self._resolve(item) for item in node) if value is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Ref":
                return _NO_VALUE if argument == "AWS::NoValue" else self._ref(argument)
            if function == "Fn::GetAtt":
                logical_id, attribute = argument.split(".", 1) if isinstance(argument, str) else argument
                return self._attribute(logical_id, attribute)
            if function == "Fn::Sub":
                return self._sub(argument)
            if function == "Fn::If":
                name, when_true, when_false = argument
                return self._resolve(when_true if self.condition(name) else when_false)
            if function == "Fn::Join":
                separator, values = argument
                return str(separator).join(str(value) for value in self._resolve(values))
            if function == "Fn::Select":
                index, values = argument
                return self._resolve(values)[int(self._resolve(index))]
            if function.startswith("Fn::"):
                raise UnresolvableError(f"the local deployment cannot resolve {function}")
        return {key: value for key, value in ((k, self._resolve(v)) for k, v in node.items()) if value is not _NO_VALUE}

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])
        values = {name: self._resolve(value) for name, value in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match[1]
            if name.startswith("!"):  # ${!Literal} is written as ${Literal}
                return "${" + name[1:] + "}"
            if name in values:
                return str(values[name])
            if "." in name and self._pseudo(name) is None:
                logical_id, attribute = name.split(".", 1)
                return self._attribute(logical_id, attribute)
            return self._ref(name)

        return _SUB_REFERENCE.sub(replace, text)

    def functions(self) -> list[str]:
        """The logical ids of the functions this deployment has (their Condition holds)."""
        return [
            logical_id
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == "AWS::Serverless::Function"
            and ("Condition" not in resource or self.condition(resource["Condition"]))
        ]

    def function_environment(self, logical_id: str) -> dict[str, str]:
        """A function's environment variables as deployed: the template's Globals, then its own."""
        global_variables = self.template.get("Globals", {}).get("Function", {}).get("Environment", {})
        own = self.template["Resources"][logical_id]["Properties"].get("Environment", {})
        variables = {**global_variables.get("Variables", {}), **own.get("Variables", {})}
        return {name: str(value) for name, value in self.resolve(variables).items()}

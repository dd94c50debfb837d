"""Prints template.yaml after the SAM transform, as JSON. Run by the SAM CLI's own interpreter (which
has the SAM translator), so the project's environment need not pin the translator's dependencies."""

import json
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class _NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        template = yaml_parse(handle.read())
    for resource in template["Resources"].values():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in properties:  # `sam package` would have put these in S3
                properties[key] = "s3://bucket/key"
    parameters = {"AWS::Region": "us-east-1", "AWS::Partition": "aws", "AWS::AccountId": "123456789012"}
    print(json.dumps(transform(template, parameters, _NoManagedPolicies())))


if __name__ == "__main__":
    main(sys.argv[1])

"""template.yaml and packaging: lint-clean, every handler where the template says, the layer pinned."""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra.template import function_handler, load_template

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
    code_dir, module, function = function_handler(logical_id)
    source = (code_dir / f"{module}.py").read_text(encoding="utf-8")
    assert re.search(rf"^{function} = |^def {function}\(", source, re.MULTILINE)


def test_functions_run_python_3_13_behind_a_regional_rest_api() -> None:
    template = load_template()
    assert template["Globals"]["Function"]["Runtime"] == "python3.13"
    api = template["Resources"]["ChatApi"]
    assert api["Type"] == "AWS::Serverless::Api"
    assert api["Properties"]["EndpointConfiguration"]["Type"] == "REGIONAL"


def test_the_layer_pins_exactly_what_the_tests_run_with() -> None:
    """layers/onboarding/requirements.txt is exported from uv.lock; the test venv is synced from it."""
    lines = (REPO / "layers/onboarding/requirements.txt").read_text().splitlines()
    pinned = {m[1]: m[2] for line in lines if (m := re.match(r"^([A-Za-z0-9_.-]+)==([^ ;]+)", line))}
    for name in ("aws-lambda-powertools", "boto3", "pydantic", "langchain-core", "langchain-aws"):
        assert pinned[name] == importlib.metadata.version(name), name

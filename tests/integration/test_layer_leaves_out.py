"""The onboarding layer is built without numpy and zstandard (layers/onboarding/Makefile): only
parts of langchain-aws and langsmith import them. zstandard is never imported; numpy is, by
langchain-aws's BedrockEmbeddings, in the functions that embed (recall), which get it from the
embeddings layer alone. Every function must still start and answer its sample event with what its
layers leave out made unimportable, as it is in Lambda."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.local_stack import LocalStack
from infra.template import load_template

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
LEFT_OUT = ("numpy", "zstandard")
MAKEFILE = ROOT / "layers" / "onboarding" / "Makefile"


def left_out_of(function: str) -> tuple[str, ...]:
    """What the function's layers do not ship: numpy comes with the embeddings layer."""
    layers = load_template()["Resources"][function]["Properties"].get("Layers", [])
    return tuple(name for name in LEFT_OUT if not (name == "numpy" and {"Ref": "EmbeddingsLayer"} in layers))


# Runs the cold-start probe after putting a finder first on sys.meta_path that refuses the packages.
PROBE = """
import runpy, sys

class LeftOut:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {left_out!r}:
            raise ModuleNotFoundError(f"{{name}} is not in the Lambda layer")
        return None

sys.meta_path.insert(0, LeftOut())
sys.argv = ["cold_start", sys.argv[1]]
runpy.run_module("infra.benchmark.cold_start", run_name="__main__")
"""


def test_the_makefile_leaves_out_exactly_these_packages() -> None:
    assert f"grep -v -E '^({'|'.join(LEFT_OUT)})=='" in MAKEFILE.read_text(encoding="utf-8")


@pytest.mark.parametrize("function", ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"])
def test_each_function_answers_without_the_left_out_packages(local_stack: LocalStack, function: str) -> None:
    completed = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-c", PROBE.format(left_out=left_out_of(function)), function],
        cwd=ROOT,
        env=local_stack.process_environment(function),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    if function == "SmsWorkerFunction":
        assert result["failed_records"] == 0, result  # the text was answered, not left for a retry
    else:
        assert result["status"] == 200, result


def test_only_the_functions_that_embed_get_numpy() -> None:
    """The SMS webhook never embeds: it stays without numpy (and its 51 MB)."""
    embedding = {"ApiFunction", "SmsWorkerFunction", "RecallIndexerFunction"}
    functions = [
        name for name, body in load_template()["Resources"].items() if body["Type"] == "AWS::Serverless::Function"
    ]
    assert {name for name in functions if "numpy" not in left_out_of(name)} == embedding


def test_the_probe_does_refuse_a_left_out_package(local_stack: LocalStack) -> None:
    """The check above would pass vacuously if the finder refused nothing."""
    probe = PROBE.format(left_out=LEFT_OUT).replace('runpy.run_module("infra.benchmark.cold_start"', "import numpy #")
    completed = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", probe, "x"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode != 0
    assert "numpy is not in the Lambda layer" in completed.stderr

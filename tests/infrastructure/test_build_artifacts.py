"""What `sam build` makes is what Lambda runs: each function's artifact imports its handler under
python3.13 with nothing but its own folder and its layers on the path (no site-packages, no
repository checkout), with the environment template.yaml gives it.

Lambda runs arm64; this machine cannot import arm64 wheels, so the build here is for x86_64 (the
template's architecture and the onboarding layer's PLATFORM swapped, nothing else). Slow: the build
downloads every wheel (about 30 s with a warm pip cache).
"""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.benchmark.sizes import runtime_python_dir
from infra.local_stack import LocalStack
from infra.template import function_handler, load_template, web_adapter_app

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _python_3_13() -> str | None:
    found = runtime_python_dir()
    return None if found is None else str(found / "python3.13")


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sam, python = shutil.which("sam"), _python_3_13()
    if sam is None or python is None:
        pytest.skip("needs the SAM CLI and Python 3.13 (.ci/run installs the SAM CLI; pyenv has 3.13)")
    folder = tmp_path_factory.mktemp("sam-build")
    text = (REPO / "template.yaml").read_text(encoding="utf-8")
    for arm, x86 in (("[arm64]", "[x86_64]"), ("BuildArchitecture: arm64", "BuildArchitecture: x86_64")):
        assert arm in text
        text = text.replace(arm, x86)
    (folder / "template.yaml").write_text(text, encoding="utf-8")
    environment = {
        **os.environ,
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}",
        "PLATFORM": "manylinux2014_x86_64",
        "PYTHON_RUNTIME": python,
        "SAM_CLI_TELEMETRY": "0",
    }
    completed = subprocess.run(  # noqa: S603 - the SAM CLI
        [sam, "build", "-t", str(folder / "template.yaml"), "--base-dir", str(REPO), "--build-dir", str(folder / "b")],
        capture_output=True, text=True, cwd=folder, env=environment, check=False, timeout=900,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return folder / "b"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack() as running:
        yield running


def _functions() -> list[str]:
    return [name for name, body in load_template()["Resources"].items() if body["Type"] == "AWS::Serverless::Function"]


@pytest.mark.parametrize("logical_id", _functions())
def test_each_artifact_imports_its_handler_with_only_its_folder_and_its_layers(
    build: Path, stack: LocalStack, logical_id: str
) -> None:
    properties = load_template()["Resources"][logical_id]["Properties"]
    globals_ = load_template()["Globals"]["Function"]
    layers = [
        layer["Ref"]
        for layer in [*globals_.get("Layers", []), *properties.get("Layers", [])]
        if isinstance(layer, dict) and "Ref" in layer
    ]
    located = web_adapter_app(logical_id)
    module = located[1] if located is not None else function_handler(logical_id)[1]
    path = [str(build / logical_id), *(str(build / layer / "python") for layer in layers)]
    probe = f"import sys; sys.path[:0] = {path!r}; import {module}; print({module}.__file__)"
    python = _python_3_13()
    assert python is not None
    completed = subprocess.run(  # noqa: S603 - Python 3.13, isolated: no site-packages, no PYTHON* variables
        [python, "-I", "-S", "-c", probe],
        capture_output=True, text=True, cwd=build, env=stack.process_environment(logical_id), check=False, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip() == str(build / logical_id / f"{module}.py")

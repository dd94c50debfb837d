"""What `sam build` makes is what Lambda runs: each function's artifact imports its handler under
python3.13 with nothing but its own folder and its layers on the path (no site-packages, no
repository checkout), with the environment template.yaml gives it.

Lambda runs arm64; this machine cannot import arm64 wheels, so the build here is for x86_64
(infra/bench/benchmark/processes.py). Slow: the build downloads every wheel.
"""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.bench.benchmark.processes import ArtifactsUnavailableError, build_artifacts, import_path, python_3_13
from infra.local.stack import LocalStack
from infra.local.template import function_handler, load_template, module_file, web_adapter_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_artifacts(tmp_path_factory.mktemp("sam-build"))
    except ArtifactsUnavailableError as missing:
        pytest.skip(str(missing))


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
    located = web_adapter_app(logical_id)
    module = located[1] if located is not None else function_handler(logical_id)[1]
    probe = f"import sys; sys.path[:0] = {import_path(build, logical_id)!r}; import {module}; print({module}.__file__)"
    completed = subprocess.run(  # noqa: S603 - Python 3.13, isolated: no site-packages, no PYTHON* variables
        [str(python_3_13()), "-I", "-S", "-c", probe],
        capture_output=True, text=True, cwd=build, env=stack.process_environment(logical_id), check=False, timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip() == str(module_file(build / logical_id, module))

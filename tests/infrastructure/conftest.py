"""Infrastructure fixtures: template.yaml after the SAM transform."""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _sam_python() -> str | None:
    sam = shutil.which("sam")
    if sam is None:
        return None
    first_line = Path(sam).read_text(encoding="utf-8", errors="replace").splitlines()[0]
    return first_line.removeprefix("#!").strip() if first_line.startswith("#!") else None


@pytest.fixture(scope="session")
def transformed() -> dict[str, Any]:
    """template.yaml as CloudFormation will see it, from the SAM translator the SAM CLI ships."""
    python = _sam_python()
    if python is None:
        pytest.skip("SAM CLI is not installed (.ci/run installs it)")
    completed = subprocess.run(  # noqa: S603 - the SAM CLI's interpreter and our probe
        [python, str(Path(__file__).with_name("sam_transform_probe.py")), str(REPO / "template.yaml")],
        capture_output=True, text=True, check=False, env={**os.environ, "AWS_DEFAULT_REGION": "us-east-1"},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    document: dict[str, Any] = json.loads(completed.stdout)
    return document

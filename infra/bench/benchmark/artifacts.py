"""Owns building what Lambda runs, on this machine: `sam build` of template.yaml for this machine's
x86_64 (Lambda runs arm64, whose wheels cannot be imported here; the architecture and the
onboarding layer's PLATFORM are the only changes), and where each function's code and layers land.

Used by the cold-start benchmark (a fresh python3.13 process on the artifact, as Lambda starts one)
and by tests/infrastructure/test_build_artifacts.py. Needs the SAM CLI and a Python 3.13.
"""

import os
import shutil
import subprocess
from pathlib import Path

from infra.bench.benchmark.sizes import runtime_python_dir
from infra.local.template import REPO_ROOT, load_template

ARM = ("[arm64]", "BuildArchitecture: arm64")
X86 = ("[x86_64]", "BuildArchitecture: x86_64")


class ArtifactsUnavailableError(RuntimeError):
    """The SAM CLI or a Python 3.13 is missing (the message says which)."""


def python_3_13() -> Path:
    found = runtime_python_dir()
    if found is None:
        raise ArtifactsUnavailableError("needs a Python 3.13 (on PATH as python3.13, or one of pyenv's versions)")
    return found / "python3.13"


def build_artifacts(folder: Path) -> Path:
    """`sam build` into `folder`/build, for x86_64; returns the build directory."""
    sam = shutil.which("sam")
    if sam is None:
        raise ArtifactsUnavailableError("needs the SAM CLI (.ci/run installs it)")
    python = python_3_13()
    text = (REPO_ROOT / "template.yaml").read_text(encoding="utf-8")
    for arm, x86 in zip(ARM, X86, strict=True):
        if arm not in text:
            raise ArtifactsUnavailableError(
                f"template.yaml no longer says {arm!r}; see infra/bench/benchmark/artifacts.py"
            )
        text = text.replace(arm, x86)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "template.yaml").write_text(text, encoding="utf-8")
    environment = {
        **os.environ,
        "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",
        "PLATFORM": "manylinux2014_x86_64",
        "PYTHON_RUNTIME": str(python),
        "SAM_CLI_TELEMETRY": "0",
    }
    build = folder / "build"
    completed = subprocess.run(  # noqa: S603 - the SAM CLI
        [sam, "build", "-t", str(folder / "template.yaml"), "--base-dir", str(REPO_ROOT), "--build-dir", str(build)],
        capture_output=True, text=True, cwd=folder, env=environment, check=False, timeout=900,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"sam build failed: {completed.stdout[-2000:]}{completed.stderr[-2000:]}")
    return build


def import_path(build: Path, logical_id: str) -> list[str]:
    """What Lambda puts on sys.path for the function: its own folder, then each layer's python/."""
    template = load_template()
    globals_ = template.get("Globals", {}).get("Function", {})
    properties = template["Resources"][logical_id]["Properties"]
    layers = [
        layer["Ref"]
        for layer in [*globals_.get("Layers", []), *properties.get("Layers", [])]
        if isinstance(layer, dict) and "Ref" in layer
    ]
    return [str(build / logical_id), *(str(build / layer / "python") for layer in layers)]

"""Deployment size of each function with its layers, unzipped, from a real `sam build`.

It needs the SAM CLI and a Python 3.13 (SAM refuses to build python3.13 functions without one on
PATH, and the onboarding layer's Makefile compiles its bytecode with it); without them the section
says so and is skipped. Layers given by ARN (Lambda Web Adapter's) are not built here and are not
counted.
"""

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infra.local.template import load_template

ROOT = Path(__file__).parents[3]


@dataclass(frozen=True)
class FunctionSize:
    function: str
    own_bytes: int
    layer_bytes: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return self.own_bytes + sum(self.layer_bytes.values())


def _tree_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file() and not entry.is_symlink())


def runtime_python_dir() -> Path | None:
    """A directory holding a working `python3.13`: on PATH, or a pyenv-installed 3.13."""
    found = shutil.which("python3.13")
    if found and subprocess.run([found, "--version"], capture_output=True, check=False).returncode == 0:  # noqa: S603
        return Path(found).parent
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    versions = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, check=False).stdout  # noqa: S603
    for version in versions.split():
        if version.startswith("3.13"):
            prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True, check=False)  # noqa: S603
            if prefix.returncode == 0:
                return Path(prefix.stdout.strip()) / "bin"
    return None


def measure_sizes() -> list[FunctionSize] | str:
    """Each function's size with its local layers, or why it could not be measured."""
    sam, python_dir = shutil.which("sam"), runtime_python_dir()
    if sam is None or python_dir is None:
        return "skipped: needs the SAM CLI and a Python 3.13 (see README, Deploying)"
    template = load_template()
    global_layers = template.get("Globals", {}).get("Function", {}).get("Layers", [])
    with tempfile.TemporaryDirectory() as scratch:
        build_dir = Path(scratch) / "build"
        completed = subprocess.run(  # noqa: S603 - the SAM CLI on our own template
            [sam, "build", "--build-dir", str(build_dir), "--cache-dir", str(Path(scratch) / "cache")],
            cwd=ROOT,
            env={
                **os.environ,
                "PATH": f"{python_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                "SAM_CLI_TELEMETRY": "0",
            },
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if completed.returncode != 0:
            return f"sam build failed: {(completed.stderr or completed.stdout).strip()[-400:]}"
        sizes = []
        for name, body in template["Resources"].items():
            if body["Type"] != "AWS::Serverless::Function":
                continue
            layers = [*global_layers, *body["Properties"].get("Layers", [])]
            local = [layer["Ref"] for layer in layers if isinstance(layer, dict) and "Ref" in layer]
            sizes.append(
                FunctionSize(
                    name, _tree_bytes(build_dir / name), {layer: _tree_bytes(build_dir / layer) for layer in local}
                )
            )
        return sizes

"""The Bedrock emulator as a child process, for measurements that must not count its work as ours."""

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.local.dynamodb_process import end_child

ROOT = Path(__file__).parents[3]


@contextmanager
def emulator_process(chunk_delay_s: float = 0.0) -> Iterator[str]:
    """The emulator's URL while its process runs."""
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.local.bedrock_emulator", "--chunk-delay", str(chunk_delay_s)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        line = process.stdout.readline() if process.stdout is not None else ""
        if not line.startswith("Bedrock emulator: "):
            raise RuntimeError(f"the Bedrock emulator did not start: {line!r}")
        yield line.removeprefix("Bedrock emulator: ").strip()
    finally:
        end_child(process)  # type: ignore[arg-type]

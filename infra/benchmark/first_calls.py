"""Cold starts and the SnapStart priming gain, from fresh processes (`cold_start.py`).

Each run is a new interpreter: the function's init, then its first call on a fresh sample event;
with priming, the function's SnapStart hooks in between (before-checkpoint, then after-restore), as
Lambda runs them around a snapshot. The variants and functions take turns, run by run, so machine
noise spreads over all of them alike. The first call's wait on the servers (moto, the Bedrock and
Twilio stand-ins) is reported apart from its own work: priming cannot change what the servers take.
Bytecode is compiled ahead, as the onboarding layer ships it (its Makefile runs compileall): into a
cache of this run's own, filled by one discarded process per function and variant first.
"""

import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from infra.benchmark.cold_start import EVENTS
from infra.local_stack import LocalStack

ROOT = Path(__file__).parents[2]
PHASES = (
    "seconds",
    "init_seconds",
    "first_call_seconds",
    "first_call_server_seconds",
    "first_call_own_seconds",
    "prime_seconds",
    "restore_hook_seconds",
)


def fresh_event(name: str, sign: Callable[[str, dict[str, str]], str], webhook_url: str) -> dict[str, Any]:
    """`name`'s sample event with a new message id, so the run does real work instead of being
    answered from the idempotency record a previous run left (the webhook's is signed again)."""
    event: dict[str, Any] = json.loads((ROOT / "events" / EVENTS[name]).read_text(encoding="utf-8"))
    sid = f"SM{uuid.uuid4().hex}"
    if name == "SmsWebhookFunction":
        form = dict(parse_qsl(event["body"]))
        form["MessageSid"] = form["SmsMessageSid"] = sid
        event["body"] = urlencode(form)
        event["headers"]["X-Twilio-Signature"] = sign(webhook_url, form)
    elif name == "SmsWorkerFunction":
        for record in event["Records"]:
            body = json.loads(record["body"])
            record["body"] = json.dumps({**body, "message_id": sid})
            record["attributes"]["MessageDeduplicationId"] = sid
    return event


def fresh_processes(
    stack: LocalStack, functions: list[str], samples: int, variants: tuple[bool, ...] = (False,)
) -> dict[tuple[str, bool], list[dict[str, float]]]:
    """Per function and variant (primed or not), the phases of `samples` fresh processes."""
    results: dict[tuple[str, bool], list[dict[str, float]]] = {(f, v): [] for f in functions for v in variants}
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(samples + 1):
            for name in functions:
                env = stack.process_environment(name)
                env.pop("PYTHONDONTWRITEBYTECODE", None)
                env["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
                for primed in variants:
                    event_path = Path(scratch) / f"{name}.json"
                    event = fresh_event(name, stack.twilio.sign, stack.webhook_url)
                    event_path.write_text(json.dumps(event), encoding="utf-8")
                    command = [sys.executable, "-m", "infra.benchmark.cold_start", name, str(event_path)]
                    output = subprocess.run(  # noqa: S603 - our own interpreter and module
                        command + (["--prime"] if primed else []),
                        cwd=ROOT,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=120,
                        check=True,
                    ).stdout
                    phases = json.loads(output.strip().splitlines()[-1])
                    if phases["status"] not in (None, 200) or phases["failed_records"]:
                        raise RuntimeError(f"{name} did not answer its event: {phases}")
                    if run:  # the first process compiles the bytecode cache
                        results[(name, primed)].append({key: phases[key] for key in PHASES})
    return results


@dataclass(frozen=True)
class Spread:
    """A median of runs in milliseconds, with the smallest and largest run."""

    median_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> "Spread":
        return cls(statistics.median(seconds) * 1000, min(seconds) * 1000, max(seconds) * 1000)

    def __str__(self) -> str:
        return f"{self.median_ms:.1f} ms ({self.min_ms:.1f}-{self.max_ms:.1f})"


@dataclass(frozen=True)
class PrimingGain:
    function: str
    runs: int
    unprimed_own: Spread  # the first call's own work, without priming
    primed_own: Spread  # the same, after the before-checkpoint and after-restore hooks
    unprimed_server: Spread  # its wait on the servers, apart
    primed_server: Spread
    prime_hook: Spread  # what the before-checkpoint hook takes (at snapshot time, once a version)
    restore_hook: Spread  # what the after-restore hook takes (on every restore)


def measure_priming(functions: list[str], samples: int) -> list[PrimingGain]:
    """The first call's own work with and without priming, side by side, on a fresh local stack."""
    with LocalStack() as stack:
        runs = fresh_processes(stack, functions, samples, variants=(False, True))
    gains = []
    for name in functions:
        plain, primed = runs[(name, False)], runs[(name, True)]

        def spread(runs: list[dict[str, float]], key: str) -> Spread:
            return Spread.of([run[key] for run in runs])

        gains.append(
            PrimingGain(
                name,
                samples,
                spread(plain, "first_call_own_seconds"),
                spread(primed, "first_call_own_seconds"),
                spread(plain, "first_call_server_seconds"),
                spread(primed, "first_call_server_seconds"),
                spread(primed, "prime_seconds"),
                spread(primed, "restore_hook_seconds"),
            )
        )
    return gains

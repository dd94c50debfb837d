"""Cold starts and the SnapStart priming gain, from fresh processes on the built artifact.

Each run is a new python3.13 interpreter on what `sam build` makes (infra/bench/benchmark/artifacts.py),
started by `cold_boot.py` with nothing but the function's folder and its layers on the path, and
timed from just before the process is started (its interpreter's start and every import count):

- cold start: the mobile API as Lambda Web Adapter runs it (uvicorn, its readiness check on
  /healthz, then the sample request over HTTP); the SMS functions imported and called once. Init
  (to ready, or to the handler imported) and the first call are reported apart.
- priming: the first call's own work (its time less its wait on the servers) without and with the
  SnapStart hooks between init and the call, as Lambda runs them around a snapshot.

The functions and variants take turns run by run, so machine noise spreads over all alike. The
first run of each is discarded: it compiles the function folder's bytecode (the layers ship theirs).
"""

import json
import random
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from infra.bench.benchmark.artifacts import import_path, python_3_13
from infra.bench.benchmark.cold_boot import event_request
from infra.local.ports import free_port
from infra.local.stack import LocalStack
from infra.local.template import function_handler, web_adapter_app

ROOT = Path(__file__).parents[3]
COLD_BOOT = Path(__file__).with_name("cold_boot.py")
EVENTS = {
    "ApiFunction": "api_chat.json",
    "SmsWebhookFunction": "sms_webhook.json",
    "SmsWorkerFunction": "sms_worker.json",
}
_ORDER = random.Random(11)  # noqa: S311 - the order of runs, not a secret


def fresh_event(name: str, sign: Callable[[str, dict[str, str]], str], webhook_url: str) -> dict[str, Any]:
    """`name`'s sample event with a new message id, so the run does real work instead of being
    answered from the idempotency record a previous run left (the webhook's is signed again), and
    for a turn a user of its own (the runs come faster than the per-user rate limit allows)."""
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
            record["body"] = json.dumps({**body, "message_id": sid, "user_id": f"cold-{sid}"})
            record["attributes"]["MessageGroupId"] = f"cold-{sid}"
            record["attributes"]["MessageDeduplicationId"] = sid
    elif name == "ApiFunction":
        event["body"] = json.dumps({**json.loads(event["body"]), "clientMessageId": sid})
        event["requestContext"]["authorizer"]["claims"]["sub"] = f"cold-{sid}"
    return event


def _spec(build: Path, name: str, **extra: Any) -> dict[str, Any]:
    located = web_adapter_app(name)
    module, attribute = (located[1], located[2]) if located else function_handler(name)[1:]
    return {"path": import_path(build, name), "module": module, "attribute": attribute, "asgi": bool(located), **extra}


def serve_once(stack: LocalStack, build: Path, http: httpx.Client) -> dict[str, float]:
    """The API started as the adapter starts it: seconds to ready, and to the first answer."""
    port = free_port("127.0.0.1")
    spec = _spec(build, "ApiFunction", mode="serve", port=port)
    method, path, headers, body = event_request(fresh_event("ApiFunction", stack.twilio.sign, stack.webhook_url))
    started = time.time()
    process = subprocess.Popen(  # noqa: S603 - Python 3.13 on the artifact, isolated
        [str(python_3_13()), "-I", "-S", str(COLD_BOOT), json.dumps(spec)],
        cwd=build / "ApiFunction", env=stack.process_environment("ApiFunction"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        while True:  # the adapter's readiness check
            try:
                if http.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if process.poll() is not None:
                    said = process.stderr.read().decode(errors="replace") if process.stderr else ""
                    raise RuntimeError(f"the API did not start: {said[-2000:]}") from None
            time.sleep(0.005)
        ready = time.time()
        answer = http.request(method, f"http://127.0.0.1:{port}{path}", headers=headers, content=body)
        finished = time.time()
        if answer.status_code != 200:
            raise RuntimeError(f"the API answered {answer.status_code}: {answer.text[:300]}")
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {"seconds": finished - started, "init_seconds": ready - started, "first_call_seconds": finished - ready}


def call_once(stack: LocalStack, build: Path, name: str, prime: bool) -> dict[str, float]:
    """The function imported and called once in a fresh process; its phases in seconds."""
    spec = _spec(build, name, mode="call", prime=prime, function=name,
                 event=fresh_event(name, stack.twilio.sign, stack.webhook_url))  # fmt: skip
    started = time.time()
    completed = subprocess.run(  # noqa: S603 - Python 3.13 on the artifact, isolated
        [str(python_3_13()), "-I", "-S", str(COLD_BOOT), json.dumps(spec)],
        cwd=build / name, env=stack.process_environment(name), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"{name} failed in a fresh process: {completed.stderr[-2000:]}")
    times = json.loads(completed.stdout.strip().splitlines()[-1])
    if times["status"] != 200 or times["failed_records"]:
        raise RuntimeError(f"{name} did not answer its event: {times}")
    first_call = times["finished"] - times["called"]
    return {
        "seconds": (times["initialized"] - started) + first_call,
        "init_seconds": times["initialized"] - started,
        "first_call_seconds": first_call,
        "first_call_server_seconds": times["server_seconds"],
        "first_call_own_seconds": first_call - times["server_seconds"],
        "prime_seconds": times["primed"] - times["initialized"],
        "restore_hook_seconds": times["restored"] - times["primed"],
    }


def measure_cold_starts(
    stack: LocalStack, build: Path, functions: list[str], samples: int
) -> dict[str, list[dict[str, float]]]:
    """`samples` cold starts of each function (after a discarded first), taking turns."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in functions}
    with httpx.Client(timeout=60) as http:
        for run in range(samples + 1):
            for name in _ORDER.sample(functions, len(functions)):
                phases = (
                    serve_once(stack, build, http) if web_adapter_app(name) else call_once(stack, build, name, False)
                )
                if run:
                    results[name].append(phases)
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


def measure_priming(stack: LocalStack, build: Path, functions: list[str], samples: int) -> list[PrimingGain]:
    """The first call's own work with and without priming, side by side."""
    runs: dict[tuple[str, bool], list[dict[str, float]]] = {(name, p): [] for name in functions for p in (False, True)}
    for run in range(samples + 1):
        for name, prime in _ORDER.sample(list(runs), len(runs)):
            phases = call_once(stack, build, name, prime)
            if run:
                runs[name, prime].append(phases)

    def spread(name: str, prime: bool, key: str) -> Spread:
        return Spread.of([phases[key] for phases in runs[name, prime]])

    return [
        PrimingGain(
            name,
            samples,
            spread(name, False, "first_call_own_seconds"),
            spread(name, True, "first_call_own_seconds"),
            spread(name, False, "first_call_server_seconds"),
            spread(name, True, "first_call_server_seconds"),
            spread(name, True, "prime_seconds"),
            spread(name, True, "restore_hook_seconds"),
        )
        for name in functions
    ]

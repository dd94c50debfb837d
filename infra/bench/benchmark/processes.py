"""What Lambda runs, measured as Lambda starts it: `sam build` of template.yaml, each function's
deployment size, its cold start in fresh python3.13 processes, and its first call after a SnapStart
restore with and without the priming hooks, and a warm check-in.

- Sizes: a real arm64 build (Lambda's), each function's folder with its local layers, unzipped.
  Layers given by ARN (Lambda Web Adapter's) are not built here and not counted.
- Cold starts: an x86_64 build (this machine cannot import arm64 wheels; the architecture and the
  layers' PLATFORM are the only changes), each run a new interpreter started by `cold_boot.py`
  with nothing but the function's folder and its layers on the path, timed from just before the
  process starts. `-B`: the run writes no bytecode into the artifact, which Lambda cannot either
  (its /var/task and /opt are read-only), so every run imports what the build shipped. The API
  runs under uvicorn until /healthz answers (the adapter's readiness check), then takes its
  request over HTTP; the others are imported and called once. Beside the wall time, the CPU time
  the process used: on a shared machine, wall time also holds the wait for a CPU.
- Priming: the first call's own work (its time less its wait on the local servers) with and
  without the SnapStart hooks between init and the call, as Lambda runs them around a snapshot.
- A check-in's firing is a real one each time: a user who agreed check-ins by SMS, written by the
  model and texted (`check_in_user`); warm, the same process fires again for other users.

Functions and variants take turns run by run, so machine noise spreads over all alike.
"""

import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx

from infra.bench.benchmark.cold_boot import event_request
from infra.local.errors import LocalToolError
from infra.local.ports import listen_on, port_of
from infra.local.stack import LocalStack
from infra.local.template import REPO_ROOT, function_handler, load_template, web_adapter_app

COLD_BOOT = Path(__file__).with_name("cold_boot.py")
EVENTS = {
    "ApiFunction": "api_chat",
    "SmsWebhookFunction": "sms_webhook",
    "SmsWorkerFunction": "sms_worker",
    "CheckInFunction": "check_in",
}
# The priming figures: each a median and range in ms, of the primed runs or not, of a phase.
PRIMING_FIGURES = {
    "unprimed_own": (False, "first_call_own_seconds"),
    "primed_own": (True, "first_call_own_seconds"),
    "unprimed_server": (False, "first_call_server_seconds"),
    "primed_server": (True, "first_call_server_seconds"),
    "prime_hook": (True, "prime_hook_seconds"),
    "restore_hook": (True, "restore_hook_seconds"),
}
_ORDER = random.Random(11)  # noqa: S311 - the order of runs, not a secret


class ArtifactsUnavailableError(LocalToolError):
    """The SAM CLI or a Python 3.13 is missing (the message says which)."""


def require_build_tools() -> Path:
    """The Python 3.13 a build and the cold starts need (ArtifactsUnavailableError without it or the SAM CLI)."""
    if shutil.which("sam") is None:
        raise ArtifactsUnavailableError("needs the SAM CLI (.ci/run installs it)")
    return python_3_13()


def python_3_13() -> Path:
    """A working `python3.13`: on PATH, or one of pyenv's versions."""
    found = shutil.which("python3.13")
    if found and subprocess.run([found, "--version"], capture_output=True, check=False).returncode == 0:  # noqa: S603
        return Path(found)
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        listed = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True, check=False)  # noqa: S603
        for version in (name for name in listed.stdout.split() if name.startswith("3.13")):
            prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True, check=False)  # noqa: S603
            if prefix.returncode == 0:
                return Path(prefix.stdout.strip()) / "bin" / "python3.13"
    raise ArtifactsUnavailableError("needs a Python 3.13 (on PATH as python3.13, or one of pyenv's versions)")


def build_artifacts(folder: Path, arm64: bool = False) -> Path:
    """`sam build` of the current tree into `folder`/build (for this machine's x86_64 unless
    `arm64`, Lambda's); returns the build directory."""
    python, sam = require_build_tools(), str(shutil.which("sam"))
    text = (REPO_ROOT / "template.yaml").read_text(encoding="utf-8")
    platform = "manylinux2014_aarch64" if arm64 else "manylinux2014_x86_64"
    for arm in () if arm64 else ("[arm64]", "BuildArchitecture: arm64"):
        if arm not in text:
            raise ArtifactsUnavailableError(f"template.yaml no longer says {arm!r}; see {Path(__file__).name}")
        text = text.replace(arm, arm.replace("arm64", "x86_64"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "template.yaml").write_text(text, encoding="utf-8")
    environment = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}", "PLATFORM": platform}
    environment |= {"PYTHON_RUNTIME": str(python), "SAM_CLI_TELEMETRY": "0"}
    command = [sam, "build", "-t", str(folder / "template.yaml"), "--base-dir", str(REPO_ROOT)]
    command += ["--build-dir", str(folder / "build"), "--cache-dir", str(folder / "cache")]
    completed = subprocess.run(  # noqa: S603 - the SAM CLI on our own template
        command, capture_output=True, text=True, cwd=folder, env=environment, check=False, timeout=1800
    )
    if completed.returncode != 0:
        raise RuntimeError(f"sam build failed: {completed.stdout[-2000:]}{completed.stderr[-2000:]}")
    return folder / "build"


def local_layers(logical_id: str) -> list[str]:
    """The function's layers that the template builds (not those given by ARN), global ones first."""
    template = load_template()
    layers = [*template.get("Globals", {}).get("Function", {}).get("Layers", [])]  # a copy: the template is cached
    layers += template["Resources"][logical_id]["Properties"].get("Layers", [])
    # A layer under a condition (CheckInFunction's Twilio layer, on SmsEnabled): the benchmark's
    # deployment has the SMS channel, so the condition holds.
    layers = [layer["Fn::If"][1] if isinstance(layer, dict) and "Fn::If" in layer else layer for layer in layers]
    return [layer["Ref"] for layer in layers if isinstance(layer, dict) and "Ref" in layer]


def import_path(build: Path, logical_id: str) -> list[str]:
    """What Lambda puts on sys.path for the function: its own folder, then each layer's python/."""
    return [str(build / logical_id), *(str(build / layer / "python") for layer in local_layers(logical_id))]


def deployment_sizes(build: Path) -> list[dict[str, Any]]:
    """Each function's unzipped bytes: its own folder, and each of its local layers."""

    def tree(path: Path) -> int:
        return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file() and not entry.is_symlink())

    sizes = []
    for name, body in load_template()["Resources"].items():
        if body["Type"] == "AWS::Serverless::Function":
            layers = {layer: tree(build / layer) for layer in local_layers(name)}
            sizes.append({"function": name, "own": tree(build / name), "layers": layers})
    return [size | {"total": size["own"] + sum(size["layers"].values())} for size in sizes]


def check_in_user(stack: LocalStack, sid: str) -> str:
    """A user a firing has a check-in for: a plan, check-ins agreed by SMS every day at noon in a
    zone where it is about midday now (never the quiet hours), and the number they text from, as a
    turn and the webhook leave them (the operator's writes)."""
    from datetime import UTC, datetime

    from onboarding.config import Settings
    from onboarding.model.answers import Answer
    from onboarding.model.state import OnboardingAgentType, OnboardingState
    from onboarding.persistence import Repositories
    from onboarding.persistence.codec import state_item

    user_id, offset = f"check-in-{sid}", 12 - datetime.now(UTC).hour
    answers = {
        "workout_planning": {"exercise_preferences": "kettlebell swings"},
        "scheduling": {
            "training_days": "Mon, Wed, Fri",
            "training_time": "6pm",
            "timezone": "Etc/UTC" if offset == 0 else f"Etc/GMT{-offset:+d}",
            "check_ins": "daily by text at noon",
        },
    }
    context = {step: {key: Answer(value).stored() for key, value in items.items()} for step, items in answers.items()}
    state = OnboardingState(current_agent=OnboardingAgentType.SCHEDULING, agent_context=context)
    table = stack.operator_client()
    table.put_item(TableName=stack.table_name, Item=state_item(user_id, state, time.time()))
    phones = Repositories.over(table, stack.table_name, Settings.from_env()).phones
    phones.find_or_create_owner("+1555" + str(int(sid[2:], 16))[:7], lambda: user_id)
    return user_id


def fresh_event(stack: LocalStack, name: str) -> dict[str, Any]:
    """`name`'s sample event with a new message id, so the run does real work instead of being
    answered from the idempotency record a previous run left (the webhook's is signed again), and
    for a turn a user of its own (the runs come faster than the per-user rate limit allows); for a
    check-in, a firing of a user of its own who agreed check-ins by SMS (`check_in_user`)."""
    event: dict[str, Any] = json.loads((REPO_ROOT / "events" / f"{EVENTS[name]}.json").read_text(encoding="utf-8"))
    sid = f"SM{uuid.uuid4().hex}"
    if name == "SmsWebhookFunction":
        form = dict(parse_qsl(event["body"])) | {"MessageSid": sid, "SmsMessageSid": sid}
        event["body"] = urlencode(form)
        event["headers"]["X-Twilio-Signature"] = stack.twilio.sign(stack.webhook_url, form)
    elif name == "SmsWorkerFunction":
        for record in event["Records"]:
            record["body"] = json.dumps(json.loads(record["body"]) | {"message_id": sid, "user_id": f"cold-{sid}"})
            record["attributes"] |= {"MessageGroupId": f"cold-{sid}", "MessageDeduplicationId": sid}
    elif name == "CheckInFunction":
        event |= {"user_id": check_in_user(stack, sid), "fire_time": time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime())}
    elif name == "ApiFunction":
        event["body"] = json.dumps(json.loads(event["body"]) | {"clientMessageId": sid})
        event["requestContext"]["authorizer"]["claims"]["sub"] = f"cold-{sid}"
    return event


def _spec(build: Path, name: str, **extra: Any) -> dict[str, Any]:
    located = web_adapter_app(name)
    module, attribute = (located[1], located[2]) if located else function_handler(name)[1:]
    return {"path": import_path(build, name), "module": module, "attribute": attribute, "asgi": bool(located), **extra}


def _children_cpu() -> float:
    """CPU seconds of the children waited for so far (the stack's servers run on, so not counted)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _command(spec: dict[str, Any]) -> list[str]:
    return [str(python_3_13()), "-B", "-I", "-S", str(COLD_BOOT), json.dumps(spec)]


def serve_once(stack: LocalStack, build: Path, http: httpx.Client) -> dict[str, float]:
    """The API started as the adapter starts it: seconds to ready, and to the first answer."""
    method, path, headers, body = event_request(fresh_event(stack, "ApiFunction"))
    with listen_on("127.0.0.1", 0) as listener:  # the process serves on it; ours closes once it has its copy
        port = port_of(listener)
        cpu, started = _children_cpu(), time.time()
        process = subprocess.Popen(  # noqa: S603 - Python 3.13 on the artifact, isolated
            _command(_spec(build, "ApiFunction", mode="serve", fd=listener.fileno())), cwd=build / "ApiFunction",
            env=stack.process_environment("ApiFunction"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            pass_fds=(listener.fileno(),),
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
    phases = {"seconds": finished - started, "init_seconds": ready - started, "first_call_seconds": finished - ready}
    return phases | {"cpu_seconds": _children_cpu() - cpu}


def _fresh_process(stack: LocalStack, build: Path, name: str, prime: bool, warm: int) -> dict[str, Any]:
    """The function imported and called once in a fresh process, then `warm` times more on fresh
    events: what cold_boot.py printed, with the process's start and CPU time."""
    event, warm_events = fresh_event(stack, name), [fresh_event(stack, name) for _ in range(warm)]
    spec = _spec(build, name, mode="call", prime=prime, function=name, event=event, warm_events=warm_events)
    cpu, started = _children_cpu(), time.time()
    completed = subprocess.run(  # noqa: S603 - Python 3.13 on the artifact, isolated
        _command(spec), cwd=build / name,
        env=stack.process_environment(name), capture_output=True, text=True, timeout=120 + 10 * warm, check=False,
    )  # fmt: skip
    if completed.returncode != 0:
        raise RuntimeError(f"{name} failed in a fresh process: {completed.stderr[-2000:]}")
    times: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    outcomes = {times["outcome"], *(call["outcome"] for call in times["warm"])}
    # A check-in that was not sent did not do a check-in's work (no model call, no text).
    if times["status"] != 200 or times["failed_records"] or (name == "CheckInFunction" and outcomes != {"sent"}):
        raise RuntimeError(f"{name} did not answer its event: {times}")
    return times | {"started": started, "cpu_seconds": _children_cpu() - cpu}


def call_once(stack: LocalStack, build: Path, name: str, prime: bool) -> dict[str, float]:
    """The function imported and called once in a fresh process; its phases in seconds."""
    times = _fresh_process(stack, build, name, prime, 0)
    first_call = times["finished"] - times["called"]
    return {
        "seconds": times["initialized"] - times["started"] + first_call,
        "init_seconds": times["initialized"] - times["started"],
        "first_call_seconds": first_call,
        "first_call_own_seconds": first_call - times["server_seconds"],
        "first_call_server_seconds": times["server_seconds"],
        "prime_hook_seconds": times["primed"] - times["initialized"],
        "restore_hook_seconds": times["restored"] - times["primed"],
        "cpu_seconds": times["cpu_seconds"],
    }


def warm_calls(stack: LocalStack, build: Path, name: str, processes: int, calls: int) -> list[dict[str, float]]:
    """`calls` warm calls in each of `processes` fresh processes (after each one's cold first call):
    each one's seconds and its wait on the servers."""
    return [
        {"seconds": call["seconds"], "server_seconds": call["server_seconds"]}
        for _ in range(processes)
        for call in _fresh_process(stack, build, name, False, calls)["warm"]
    ]


def cold_starts(stack: LocalStack, build: Path, functions: list[str], samples: int) -> dict[str, list[dict[str, Any]]]:
    """`samples` cold starts of each function, taking turns."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in functions}
    with httpx.Client(timeout=60) as http:
        for _ in range(samples):
            for name in _ORDER.sample(functions, len(functions)):
                served = web_adapter_app(name) is not None
                runs[name].append(serve_once(stack, build, http) if served else call_once(stack, build, name, False))
    return runs


def priming(stack: LocalStack, build: Path, functions: list[str], samples: int) -> list[dict[str, Any]]:
    """The first call's own work with and without priming, side by side (median and range in ms)."""
    runs: dict[tuple[str, bool], list[dict[str, float]]] = {(name, p): [] for name in functions for p in (False, True)}
    for _ in range(samples):
        for name, prime in _ORDER.sample(list(runs), len(runs)):
            runs[name, prime].append(call_once(stack, build, name, prime))

    def spread(name: str, prime: bool, key: str) -> list[float]:
        values = [run[key] * 1000 for run in runs[name, prime]]
        return [statistics.median(values), min(values), max(values)]

    return [
        {"function": name, "runs": samples} | {key: spread(name, *run) for key, run in PRIMING_FIGURES.items()}
        for name in functions
    ]

"""The onboarding layer is built without numpy and zstandard (layers/onboarding/Makefile): only
parts of langchain-aws and langsmith import them, and no function of ours does (recall calls Titan
with its JSON body, onboarding/recall/embeddings.py). The Twilio layer is built without Twilio's
async client (aiohttp and its stack) and the REST domains other than `api` (layers/twilio/Makefile).
Every function must still start and answer its sample event with what its layers leave out made
unimportable, as it is in Lambda."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import twilio.rest as twilio_rest

from infra.bench.benchmark.processes import COLD_BOOT, fresh_event, local_layers
from infra.local.stack import LocalStack
from infra.local.template import function_handler, load_template, web_adapter_app

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
LEFT_OUT = ("numpy", "zstandard")
TWILIO_LAYER_ONLY = ("twilio", "cryptography")
MAKEFILE = ROOT / "layers" / "onboarding" / "Makefile"
TWILIO_MAKEFILE = ROOT / "layers" / "twilio" / "Makefile"
# What the Twilio layer leaves out: the async client's stack (as the Makefile names its
# requirements, and as each is imported) and every REST domain but the one that sends messages.
TWILIO_ASYNC = ("aiohttp", "aiohttp-retry", "aiohappyeyeballs", "aiosignal", "attrs", "frozenlist", "multidict",
                "propcache", "yarl")  # fmt: skip
TWILIO_LEFT_OUT = (
    *(name.replace("-", "_") for name in TWILIO_ASYNC),
    "attr",
    *(f"twilio.rest.{domain.name}" for domain in Path(twilio_rest.__file__).parent.iterdir()
      if domain.is_dir() and domain.name not in ("api", "__pycache__")),
)  # fmt: skip


def left_out_of(function: str) -> tuple[str, ...]:
    """What the function's layers do not ship: twilio and cryptography come with the Twilio layer,
    which leaves out Twilio's async client and its REST domains but `api`."""
    return LEFT_OUT + (TWILIO_LAYER_ONLY if "TwilioLayer" not in local_layers(function) else TWILIO_LEFT_OUT)


def test_the_makefiles_leave_out_exactly_these_packages() -> None:
    assert f"grep -v -E '^({'|'.join(LEFT_OUT)})=='" in MAKEFILE.read_text(encoding="utf-8")
    twilio = TWILIO_MAKEFILE.read_text(encoding="utf-8")
    assert f"LEFT_OUT = {'|'.join(TWILIO_ASYNC)}\n" in twilio
    assert 'twilio/rest" -mindepth 1 -maxdepth 1 -type d ! -name api -exec rm -rf' in twilio


def _boot(stack: LocalStack, function: str, **extra: Any) -> "subprocess.CompletedProcess[str]":
    """The function in a fresh process of this interpreter (infra/bench/benchmark/cold_boot.py), imported and
    called once with a fresh sample event, with the left-out packages unimportable."""
    located = web_adapter_app(function)
    module, attribute = (located[1], located[2]) if located else function_handler(function)[1:]
    code_dir = located[0] if located else function_handler(function)[0]
    spec = {"mode": "call", "path": [str(code_dir)], "module": module, "attribute": attribute, "asgi": bool(located),
            "function": function, "left_out": list(left_out_of(function)),
            "event": fresh_event(stack, function), **extra}  # fmt: skip
    return subprocess.run(  # noqa: S603 - our own interpreter and the benchmark's boot script
        [sys.executable, str(COLD_BOOT), json.dumps(spec)],
        cwd=ROOT, env=stack.process_environment(function), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("function", ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction", "CheckInFunction"])
def test_each_function_answers_without_the_left_out_packages(local_stack: LocalStack, function: str) -> None:
    completed = _boot(local_stack, function)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["status"] == 200, result
    assert result["failed_records"] == 0, result  # a text was answered, not left for a retry
    if function == "CheckInFunction":  # a check-in written by the model and texted through Twilio's client
        assert result["outcome"] == "sent", result


def test_no_function_ships_numpy() -> None:
    """Recall embeds without it: no layer brings numpy (and its 51 MB) back."""
    functions = [
        name for name, body in load_template()["Resources"].items() if body["Type"] == "AWS::Serverless::Function"
    ]
    assert all("numpy" in left_out_of(name) for name in functions)
    assert not [name for name, body in load_template()["Resources"].items() if "numpy" in str(body).lower()]


@pytest.mark.parametrize(("module", "refused"), [("numpy", "numpy"), ("twilio.rest.voice.v1", "twilio.rest.voice")])
def test_the_probe_does_refuse_a_left_out_package(local_stack: LocalStack, module: str, refused: str) -> None:
    """The check above would pass vacuously if the finder refused nothing."""
    completed = _boot(local_stack, "SmsWebhookFunction", module=module)
    assert completed.returncode != 0
    assert f"{refused} is not in the Lambda layer" in completed.stderr

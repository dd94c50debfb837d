"""One cold start, in the process it runs in: `python -m infra.benchmark.cold_start <FunctionId> [EVENT] [--prime]`.

Prints the seconds from just before the function's module is imported until its first answer to
its sample event in events/: the module's imports, its clients, and the first handler call (for the
API, through the ASGI app as Lambda Web Adapter calls it); and the two phases apart: init (import
and clients, which is what SnapStart restores from a snapshot instead of running) and first call.
Of the first call, the time spent waiting on the servers (every botocore request from `before-send`
to `before-parse`, and every request to Twilio's stand-in) is reported apart from the rest, which
is the call's own work. With `--prime`, the function's SnapStart hooks run between the two phases
as Lambda runs them around a snapshot (before-checkpoint, then after-restore), timed apart.

The local tooling that locates the function and plays the adapter is imported before the clock
starts, because in Lambda it is not there; boto3 is imported inside the clock (every function pays
for it), only so that the server clock is on its session before any client is made. The caller
sets the local stack's environment.
"""

import asyncio
import importlib.util
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from infra.lambda_runner import LocalLambdaContext
from infra.template import function_handler, web_adapter_app
from infra.web_adapter import invoke_asgi

EVENTS = {
    "ApiFunction": "api_chat.json",
    "SmsWebhookFunction": "sms_webhook.json",
    "SmsWorkerFunction": "sms_worker.json",
}
# The paths template.yaml gives Lambda Web Adapter for the API's SnapStart hooks.
HOOKS = ("/_snapstart/before-checkpoint", "/_snapstart/after-restore")


class _TwilioClock:
    """Seconds spent waiting on Twilio's stand-in (requests' `Session.send`), which botocore does not see."""

    def __init__(self) -> None:
        self.seconds = 0.0
        requests = sys.modules.get("requests")  # patched after init: its import belongs to init
        if requests is None:  # this function never talks to Twilio
            return
        original = requests.Session.send

        def timed(session: Any, request: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(session, request, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        requests.Session.send = timed


def _hook(app: Any, module: Any, which: int) -> None:
    """Run the function's SnapStart hook: over HTTP for the API (as the adapter does), else the runtime's."""
    if app is not None:
        response = asyncio.run(invoke_asgi(app, {"httpMethod": "POST", "path": HOOKS[which], "headers": {}}))
        if response["statusCode"] >= 300:
            raise RuntimeError(f"the SnapStart hook {HOOKS[which]} answered {response['statusCode']}")
        return
    primer = module._parts.primer  # what the runtime's hooks were handed
    if which == 0:
        primer.prime_sync()
    else:
        primer.renew()


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--prime"]
    prime = "--prime" in sys.argv[1:]
    logical_id = args[0]
    # The benchmark passes a fresh event per run (a new message id, so no run is answered from the
    # idempotency record of the one before); by default the sample event in events/.
    path = Path(args[1]) if len(args) > 1 else Path(__file__).parents[2] / "events" / EVENTS[logical_id]
    event = json.loads(path.read_text(encoding="utf-8"))
    located = web_adapter_app(logical_id)
    code_dir, module_name, attribute = located or function_handler(logical_id)
    started = time.perf_counter()
    import boto3

    from infra.benchmark.webhook_ack import ServerClock

    boto3.DEFAULT_SESSION = boto3.Session()  # the default session every client of ours is made on
    servers = ServerClock(boto3.DEFAULT_SESSION)
    spec = importlib.util.spec_from_file_location(f"_cold_{logical_id}", code_dir / f"{module_name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {logical_id} from {code_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(code_dir))
    spec.loader.exec_module(module)
    entry = getattr(module, attribute)
    initialized = time.perf_counter()  # Lambda's init phase ends here: what SnapStart would snapshot
    primed = restored = initialized
    if prime:
        _hook(entry if located else None, module, 0)
        primed = time.perf_counter()
        _hook(entry if located else None, module, 1)
        restored = time.perf_counter()
    twilio = _TwilioClock()
    servers.seconds = 0.0
    call_started = time.perf_counter()
    if located is not None:
        response = asyncio.run(invoke_asgi(entry, event))
    else:
        response = entry(event, LocalLambdaContext(function_name=logical_id, aws_request_id=str(uuid.uuid4())))
    finished = time.perf_counter()
    waited = servers.seconds + twilio.seconds
    print(
        json.dumps(
            {
                "function": logical_id,
                "primed": prime,
                "seconds": (initialized - started) + (finished - call_started),
                "init_seconds": initialized - started,
                "prime_seconds": primed - initialized,
                "restore_hook_seconds": restored - primed,
                "first_call_seconds": finished - call_started,
                "first_call_server_seconds": waited,
                "first_call_own_seconds": finished - call_started - waited,
                "status": response.get("statusCode"),  # an HTTP function's
                "failed_records": len(response.get("batchItemFailures", [])),  # the queue worker's
            }
        )
    )


if __name__ == "__main__":
    main()

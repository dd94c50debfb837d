"""One cold start, in the process it runs in: `python -m infra.benchmark.cold_start <FunctionId>`.

Prints the seconds from just before the function's module is imported until its first answer to
its sample event in events/: the module's imports, its clients, and the first handler call (for the
API, through the ASGI app as Lambda Web Adapter calls it); and the two phases apart: init (import
and clients, which is what SnapStart restores from a snapshot instead of running) and first call.
The local tooling that locates the function and plays the adapter is imported before the clock
starts, because in Lambda it is not there; boto3 is not imported before it (every function pays
for it). The caller sets the local stack's environment.
"""

import asyncio
import importlib.util
import json
import sys
import time
import uuid
from pathlib import Path

from infra.lambda_runner import LocalLambdaContext
from infra.template import function_handler, web_adapter_app
from infra.web_adapter import invoke_asgi

EVENTS = {
    "ApiFunction": "api_chat.json",
    "SmsWebhookFunction": "sms_webhook.json",
    "SmsWorkerFunction": "sms_worker.json",
}


def main() -> None:
    logical_id = sys.argv[1]
    # The benchmark passes a fresh event per run (a new message id, so no run is answered from the
    # idempotency record of the one before); by default the sample event in events/.
    path = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parents[2] / "events" / EVENTS[logical_id]
    event = json.loads(path.read_text(encoding="utf-8"))
    located = web_adapter_app(logical_id)
    code_dir, module_name, attribute = located or function_handler(logical_id)
    started = time.perf_counter()
    spec = importlib.util.spec_from_file_location(f"_cold_{logical_id}", code_dir / f"{module_name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {logical_id} from {code_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(code_dir))
    spec.loader.exec_module(module)
    entry = getattr(module, attribute)
    initialized = time.perf_counter()  # Lambda's init phase ends here: what SnapStart would snapshot
    if located is not None:
        response = asyncio.run(invoke_asgi(entry, event))
    else:
        response = entry(event, LocalLambdaContext(function_name=logical_id, aws_request_id=str(uuid.uuid4())))
    finished = time.perf_counter()
    print(
        json.dumps(
            {
                "function": logical_id,
                "seconds": finished - started,
                "init_seconds": initialized - started,
                "first_call_seconds": finished - initialized,
                "status": response.get("statusCode"),  # an HTTP function's
                "failed_records": len(response.get("batchItemFailures", [])),  # the queue worker's
            }
        )
    )


if __name__ == "__main__":
    main()

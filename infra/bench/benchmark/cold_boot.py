"""A fresh Lambda process for the cold-start benchmark: `python3.13 -B -I -S cold_boot.py SPEC`, SPEC
being JSON. It imports nothing of this repository: only the artifact's folders SPEC puts on
sys.path (the function's own, then its layers', as Lambda's runtime does) and the standard library.

- "serve": the mobile API as Lambda Web Adapter starts it (run.sh: uvicorn; here on the socket
  SPEC["fd"] the parent bound and handed over); the benchmark times the process from its start to
  the answer of its first request.
- "call": import the handler (Lambda's init), optionally run the SnapStart hooks (before-checkpoint,
  after-restore; SPEC["prime"]), then call it once with SPEC["event"]; print one JSON line of wall-clock times
  (`time.time()`, comparable with the parent's) and how long the first call waited on the servers
  (botocore's requests from `before-send` to `before-parse`, and Twilio's over `requests`). Then
  once with each of SPEC["warm_events"], if any: each warm call's time and its wait.
"""

import asyncio
import importlib
import json
import sys
import time
from typing import Any

HOOKS = ("/_snapstart/before-checkpoint", "/_snapstart/after-restore")


class _Waits:
    """Seconds the process spends waiting on servers, once `counting` is set."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.counting = False
        self._sent_at: float | None = None

    def sent(self, **_: Any) -> None:
        self._sent_at = time.perf_counter()

    def answered(self, **_: Any) -> None:
        if self._sent_at is not None and self.counting:
            self.seconds += time.perf_counter() - self._sent_at
        self._sent_at = None

    def time_requests(self) -> None:
        requests = sys.modules.get("requests")  # Twilio's client; absent in a function that never sends
        if requests is None:
            return
        original = requests.Session.send

        def timed(session: Any, request: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(session, request, **kwargs)
            finally:
                if self.counting:
                    self.seconds += time.perf_counter() - started

        requests.Session.send = timed


def _asgi_request(app: Any, method: str, path: str, headers: dict[str, str], body: bytes) -> int:
    """One HTTP request to an ASGI app, as the adapter forwards it; its status."""
    import httpx  # the onboarding layer's (langsmith needs it); imported before init's clock stops (main)

    async def send() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            return (await client.request(method, path, headers=headers, content=body)).status_code

    return asyncio.run(send())


def event_request(event: dict[str, Any]) -> tuple[str, str, dict[str, str], bytes]:
    """The HTTP request Lambda Web Adapter makes of an API Gateway REST proxy event."""
    headers = {k: v for k, v in (event.get("headers") or {}).items() if k.lower() != "x-amzn-request-context"}
    headers["x-amzn-request-context"] = json.dumps(event.get("requestContext") or {})
    query = "&".join(f"{k}={v}" for k, v in (event.get("queryStringParameters") or {}).items())
    body = (event.get("body") or "").encode()
    headers["content-length"] = str(len(body))
    return event.get("httpMethod", "GET"), event.get("path", "/") + (f"?{query}" if query else ""), headers, body


class _Context:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.memory_limit_in_mb = 1024
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.aws_request_id = f"cold-{time.time_ns()}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def _hook(module: Any, entry: Any, asgi: bool, which: int) -> None:
    """The function's SnapStart hook: over HTTP for the API (as the adapter relays it), else the runtime's."""
    if asgi:
        status = _asgi_request(entry, "POST", HOOKS[which], {}, b"")
        if status >= 300:
            raise RuntimeError(f"the SnapStart hook {HOOKS[which]} answered {status}")
    elif which == 0:
        module._parts.primer.prime_sync()
    else:
        module._parts.primer.renew()


class _LeftOut:
    """Makes packages unimportable, as the onboarding layer leaves them out (SPEC["left_out"])."""

    def __init__(self, names: list[str]) -> None:
        self.names = set(names)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        for left_out in self.names:  # a package, or a part of one (twilio.rest.voice)
            if name == left_out or name.startswith(f"{left_out}."):
                raise ModuleNotFoundError(f"{left_out} is not in the Lambda layer")


def main() -> None:
    spec = json.loads(sys.argv[1])
    sys.path[:0] = spec["path"]
    if spec.get("left_out"):
        sys.meta_path.insert(0, _LeftOut(spec["left_out"]))
    if spec["mode"] == "serve":
        import socket

        import uvicorn  # type: ignore[import-not-found,unused-ignore]

        # The socket the benchmark bound and handed over (pass_fds): the port is never free to take meanwhile.
        listener = socket.socket(fileno=spec["fd"])
        config = uvicorn.Config(f"{spec['module']}:{spec['attribute']}", log_level="error")
        uvicorn.Server(config).run(sockets=[listener])
        return
    import boto3

    waits = _Waits()
    boto3.DEFAULT_SESSION = boto3.Session()  # every client of ours is made on the default session
    boto3.DEFAULT_SESSION.events.register("before-send", waits.sent)
    boto3.DEFAULT_SESSION.events.register("before-parse", waits.answered)
    if spec["asgi"]:
        import httpx  # noqa: F401 - what stands in for the adapter's HTTP is not the function's first call
    module = importlib.import_module(spec["module"])  # a dotted name too (the API's mobile_api.app)
    entry = getattr(module, spec["attribute"])
    initialized = primed = restored = time.time()
    if spec.get("prime"):  # as Lambda runs the hooks around a snapshot: before-checkpoint, after-restore
        _hook(module, entry, spec["asgi"], 0)
        primed = time.time()
        _hook(module, entry, spec["asgi"], 1)
        restored = time.time()
    waits.time_requests()
    waits.counting = True
    called = time.time()
    status, failed, outcome = _call(entry, spec, spec["event"])
    finished = time.time()
    first_wait, warm = waits.seconds, []
    for event in spec.get("warm_events", []):  # the same process again: warm calls
        waits.seconds, started = 0.0, time.time()
        warm_outcome = _call(entry, spec, event)[2]
        warm.append({"seconds": time.time() - started, "server_seconds": waits.seconds, "outcome": warm_outcome})
    times = {"initialized": initialized, "primed": primed, "restored": restored, "called": called, "finished": finished}
    answered = {"status": status, "failed_records": failed, "outcome": outcome, "warm": warm}
    print(json.dumps({**times, "server_seconds": first_wait, **answered}))


def _call(entry: Any, spec: dict[str, Any], event: dict[str, Any]) -> tuple[int, int, str | None]:
    """One call of the function: its HTTP status (200 for a function without one), the batch's
    failed records, and the outcome it names (a check-in's `status`)."""
    if spec["asgi"]:
        return _asgi_request(entry, *event_request(event)), 0, None
    response = entry(event, _Context(spec["function"]))
    outcome = response.get("status")
    return response.get("statusCode", 200), len(response.get("batchItemFailures", [])), outcome


if __name__ == "__main__":
    main()

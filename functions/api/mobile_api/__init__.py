"""The mobile API, as Lambda Web Adapter serves it (run.sh: `uvicorn mobile_api.app:app`).

A package so that its modules import each other one way, relatively, whether Lambda loads it from
the function's folder (the import root there) or the tests import it as `functions.api.mobile_api`.

- `app`: the served app, built from the settings (the composition root's `build_api`);
- `routes`: `create_app`, the routes: HTTP to `TurnService` and `AccountService` and back;
- `sse`: the Server-Sent Events framing of a streamed reply, and the Accept header it answers;
- `errors`: the one table from domain exception to HTTP answer, and its handlers;
- `schemas`: the JSON shapes;
- `snapstart_hooks`: the routes Lambda Web Adapter calls around a SnapStart snapshot;
- `log`: the function's one logger.
"""

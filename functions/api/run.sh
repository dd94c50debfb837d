#!/bin/sh
# Lambda Web Adapter starts this, then forwards each invocation to the app over HTTP on $PORT.
# The layers' packages (/opt/python) are not on the path of a process the runtime did not start.
export PYTHONPATH="/opt/python:${LAMBDA_TASK_ROOT:-.}${PYTHONPATH:+:$PYTHONPATH}"
exec python -m uvicorn --host 127.0.0.1 --port "${PORT:-8080}" --no-access-log mobile_api.app:app

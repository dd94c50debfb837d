"""The local stack's log lines name the function that wrote them. Every function
shares one process locally, so a line of the API must not carry the SMS worker's name once a text
has been answered.

those JSON lines go to a file under the data file's folder (`.local/logs/` by default),
whose path the banner prints; the terminal gets one human line per request or text; `-v` puts the
JSON back on the terminal."""

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import run, running_stack


def test_the_banner_names_the_urls_the_environment_file_and_the_logs_and_nothing_else(tmp_path: Path) -> None:
    """A screenful, not 38 `export` lines: the environment for another shell is in a file it names."""
    data_file = tmp_path / "d.jsonl"
    with running_stack(data_file) as stack:
        banner = stack.banner.splitlines()
        env_file = tmp_path / "d.env"
        assert f"Environment for another process: source {env_file}" in banner
        sourced = subprocess.run(  # noqa: S603 - bash reading the file the stack wrote
            ["bash", "-c", f"source {env_file} && echo $AWS_ENDPOINT_URL_DYNAMODB $TABLE_NAME"],  # noqa: S607
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert sourced.stdout.split() == [f"http://127.0.0.1:{stack.ports['dynamodb']}", "onboarding-memory-local"]
        stack.stop()
    assert banner[0].startswith(f"Local stack running. API: {stack.api_url} (OpenAPI at {stack.api_url}/openapi.json")
    assert f"Logs: {tmp_path / 'logs' / 'local_stack.log'} (JSON lines; -v shows them here)." in banner
    assert not [line for line in banner if line.lstrip().startswith(("export ", "unset "))], banner
    assert any(line.startswith("Ports: DynamoDB ") for line in banner), banner  # what 0 got
    assert len(banner) <= 11, banner
    assert not env_file.exists()  # gone with the stack: nothing points at servers that are gone


def test_after_a_text_the_apis_lines_still_name_the_api(tmp_path: Path) -> None:
    data_file = tmp_path / "d.jsonl"
    with running_stack(data_file) as stack:
        texted = run("infra.sms", "Hi coach", "--data-file", str(data_file))
        assert "coach (SMS)>" in texted.stdout, texted.stderr[-2000:]
        answered = httpx.post(
            f"{stack.api_url}/chat", json={"message": "Hi"}, headers={"Authorization": "Bearer me"}, timeout=60
        )
        assert answered.status_code == 200
        stack.stop()
    log_file = tmp_path / "logs" / "local_stack.log"
    # Powertools' log lines (and the metrics' EMF lines, which have no level) all in the file.
    lines = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if "level" in line]
    names = {line["message"]: line.get("function_name") for line in lines}
    assert names["Reply sent"] == "SmsWorkerFunction"
    assert names["Turn completed"] == "ApiFunction"
    # The terminal: no JSON, one line for each thing the person did.
    terminal = [line for line in stack.stdout.splitlines() if line.strip()]
    assert not [line for line in terminal if line.startswith("{")], terminal
    assert [line.split(" (")[0] for line in terminal] == [
        "POST /sms -> 200",
        "SMS queue -> SmsWorkerFunction: 1 of 1 text handled",
        "POST /chat -> 200",
    ]
    assert "service_undefined" not in stack.stdout


def _log_lines(log_file: Path) -> list[dict[str, Any]]:
    """Powertools' log lines in the file (the metrics' EMF lines, which have no level, left out)."""
    lines = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if "level" in line]


def test_each_functions_lines_carry_its_own_name_and_request_id(tmp_path: Path) -> None:
    """Every function shares one process and one Powertools formatter locally. A text (the webhook
    and the worker), six API requests at once (JSON and streamed) and the recall indexer, which runs
    after every stored message: each API request's lines carry its own request id (the
    `x-amzn-RequestId` it was answered with), the API's name and one invocation id of their own,
    and no key another function set (the indexer's `cold_start`); the indexer's lines name the
    indexer and carry no request's id. The formatter is shared, so its keys must not be: as its
    shared state, API lines would carry the indexer's cold start, and the requests would read and
    clear each other's correlation ids (a streamed reply's lines would have none)."""
    data_file = tmp_path / "d.jsonl"
    log_file = tmp_path / "logs" / "local_stack.log"
    with running_stack(data_file) as stack:
        texted = run("infra.sms", "Hi coach", "--data-file", str(data_file))
        assert "coach (SMS)>" in texted.stdout, texted.stderr[-2000:]

        def chat(n: int) -> str:
            headers = {"Authorization": f"Bearer logs-{n}"} | ({"Accept": "text/event-stream"} if n % 2 else {})
            answer = httpx.post(f"{stack.api_url}/chat", json={"message": "Hi"}, headers=headers, timeout=60)
            assert answer.status_code == 200
            return answer.headers["x-amzn-requestid"]

        with ThreadPoolExecutor(max_workers=6) as pool:
            request_ids = list(pool.map(chat, range(6)))
        deadline = time.monotonic() + 30  # the indexer's lines for the last messages stored
        while (
            time.monotonic() < deadline
            and sum(line["message"] == "Indexed a batch of message changes" for line in _log_lines(log_file)) < 2
        ):
            time.sleep(0.2)
        stack.stop()
    lines = _log_lines(log_file)
    invocations = set()
    for request_id in request_ids:
        own = [line for line in lines if line.get("correlation_id") == request_id]
        assert {"turn_received", "turn_responded", "Context access"} <= {line["message"] for line in own}
        assert {line.get("function_name") for line in own} == {"ApiFunction"}
        [invocation] = {line.get("function_request_id") for line in own}  # one invocation, no other's line
        invocations.add(invocation)
        assert [line for line in own if "cold_start" in line] == []  # the API sets none; the indexer does
    assert len(invocations) == len(request_ids)
    api = [line for line in lines if line.get("function_name") == "ApiFunction"]
    assert {line.get("correlation_id") for line in api} == set(request_ids)  # none without its request's id
    indexed = [line for line in lines if line["message"] == "Indexed a batch of message changes"]
    assert len(indexed) >= 2
    assert {line.get("function_name") for line in indexed} == {"RecallIndexerFunction"}
    assert {line.get("correlation_id") for line in indexed} == {None}  # neither a request's nor the text's
    assert not {line.get("function_request_id") for line in indexed} & invocations
    assert {line.get("function_name") for line in lines if line["message"] == "Reply sent"} == {"SmsWorkerFunction"}


def test_invoke_keeps_its_log_lines_in_a_file_unless_v(tmp_path: Path) -> None:
    data_file = tmp_path / "d.jsonl"
    quiet = run("infra.invoke", "ApiFunction", "-e", "events/api_history.json", "--data-file", str(data_file))
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert json.loads(quiet.stdout)["statusCode"] == 200  # the result alone: no log line before it
    log_file = tmp_path / "logs" / "invoke.log"
    assert f"Logs: {log_file}" in quiet.stderr
    assert [json.loads(line)["message"] for line in log_file.read_text(encoding="utf-8").splitlines()]
    verbose = run("infra.invoke", "ApiFunction", "-e", "events/api_history.json", "--data-file", str(data_file), "-v")
    assert verbose.returncode == 0
    assert verbose.stdout.startswith('{"level"'), verbose.stdout[:300]

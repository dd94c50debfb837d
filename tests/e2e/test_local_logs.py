"""Issue 19, item 8: the local stack's log lines name the function that wrote them. Every function
shares one process locally, and a line of the API used to carry the SMS worker's name once a text
had been answered.

Issue 29: those JSON lines go to a file under the data file's folder (`.local/logs/` by default),
whose path the banner prints; the terminal gets one human line per request or text; `-v` puts the
JSON back on the terminal."""

import json
from pathlib import Path

import httpx

from tests.support.processes import run, running_stack


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
        "SMS queue -> SmsWorkerFunction: 1 of 1 text(s) handled",
        "POST /chat -> 200",
    ]
    assert "service_undefined" not in stack.stdout


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

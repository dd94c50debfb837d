"""Over real HTTP: the local stack started with a feature flags file (`--flags`), the
mobile API on the local gateway. Switching memory off in the file puts the next turns in
single-prompt mode after FEATURE_FLAGS_MAX_AGE_S, with no restart; a broken or missing file never
fails a turn and leaves the last known flags in force; switching memory back on restores it whole."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.local.bedrock_emulator.recorded import RecordedRequest
from infra.local.stack import LocalStack
from onboarding.llm.wording import SINGLE_PROMPT_RULE
from onboarding.replies import MEMORY_UNAVAILABLE_NOTICE
from tests.support.views import default_flags_document

HTTP = httpx.Client(timeout=60)
MAX_AGE_S = 1


@pytest.fixture
def flags_file(tmp_path: Path) -> Path:
    path = tmp_path / "flags.json"
    path.write_text(json.dumps(default_flags_document()), encoding="utf-8")
    return path


@pytest.fixture
def flagged_stack(flags_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    monkeypatch.setenv("FEATURE_FLAGS_MAX_AGE_S", str(MAX_AGE_S))
    with LocalStack(api_port=0, flags_file=flags_file) as stack:
        yield stack


def _say(stack: LocalStack, user_id: str, message: str) -> tuple[str, RecordedRequest]:
    before = len(stack.bedrock.requests)
    response = HTTP.post(
        f"{stack.api_url}/chat", json={"message": message}, headers={"Authorization": f"Bearer {user_id}"}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["reply"]), stack.bedrock.requests[before]  # the turn's first model call


def _set_memory(path: Path, on: bool) -> None:
    path.write_text(json.dumps({**default_flags_document(), "memory": {"default": on}}), encoding="utf-8")
    time.sleep(MAX_AGE_S + 0.3)  # past the cache's max age


def test_a_flag_change_in_the_file_applies_without_a_restart_and_a_broken_file_fails_no_turn(
    flagged_stack: LocalStack, flags_file: Path, user_id: str
) -> None:
    _say(flagged_stack, user_id, "Hi!")
    _, request = _say(flagged_stack, user_id, "Intermediate, I think")
    assert next(t.text for t in request.conversation if t.role == "user") == "Hi!"  # memory on: the history

    _set_memory(flags_file, on=False)
    reply, request = _say(flagged_stack, user_id, "What should I do today?")
    assert [(t.role, t.text) for t in request.conversation] == [("user", "What should I do today?")]
    assert SINGLE_PROMPT_RULE in request.system_text
    assert not reply.startswith(MEMORY_UNAVAILABLE_NOTICE)

    flags_file.write_text("{ not json", encoding="utf-8")  # a bad edit: the last known flags stay
    time.sleep(MAX_AGE_S + 0.3)
    _, request = _say(flagged_stack, user_id, "Still there?")
    assert len(request.conversation) == 1
    flags_file.unlink()  # gone: still no failed turn, still the last known flags
    time.sleep(MAX_AGE_S + 0.3)
    _, request = _say(flagged_stack, user_id, "Anyone?")
    assert len(request.conversation) == 1

    _set_memory(flags_file, on=True)
    _, request = _say(flagged_stack, user_id, "Back again")
    said = [t.text for t in request.conversation if t.role == "user"]
    assert said[0] == "Hi!"  # the whole memory again, with the single-prompt turns' messages in it
    assert "What should I do today?" in said

"""`--flags FILE` of infra.chat and infra.local_stack: a file that is missing, not JSON
or not in the feature flags schema is a clear error at start, before anything runs; a good one
reaches the turns through FEATURE_FLAGS_FILE."""

import json
import os
from pathlib import Path

import pytest

from infra import chat
from infra.local.errors import LocalToolError
from infra.local.flags import checked_flags_file
from tests.support.views import default_flags_document


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it"),
        ("{ not json", "not JSON"),
        ("[]", "not a JSON object"),
        (json.dumps({"memory": {"default": "yes"}}), "not in the feature flags schema"),
    ],
)
def test_a_bad_flags_file_is_a_clear_error_before_the_chat_starts(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "flags.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(LocalToolError, match=message):
        chat.main(["--flags", str(path), "--data-file", str(tmp_path / "data.jsonl")])
    assert not (tmp_path / "data.jsonl").exists()  # nothing started
    assert "POWERTOOLS_METRICS_DISABLED" not in os.environ  # nor changed: later tests read the metrics


def test_a_good_flags_file_is_given_as_an_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("flags.json").write_text(json.dumps(default_flags_document()), encoding="utf-8")
    assert checked_flags_file(Path("flags.json")) == tmp_path / "flags.json"

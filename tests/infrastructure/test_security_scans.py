"""The offline security scanners on every run: no finding that docs/security-findings.md does not
explain, and no high-severity one at all (pip-audit runs in `python -m infra.security_scan`)."""

from collections.abc import Callable
from pathlib import Path

import pytest

from infra.security_scan import Finding, ScanResult, bandit, cfn_lint, checkov, explained_findings

pytestmark = pytest.mark.infrastructure


@pytest.mark.parametrize("scan", [cfn_lint, checkov, bandit], ids=["cfn-lint", "checkov", "bandit"])
def test_every_finding_is_explained_and_none_is_high(scan: Callable[[], ScanResult]) -> None:
    result = scan()
    explained = explained_findings()
    unexplained = [f for f in result.findings if (f.scanner, f.rule, f.where) not in explained]
    assert unexplained == []
    assert [f for f in result.findings if f.severity == "HIGH"] == []


def test_the_explanations_are_read_from_the_table(tmp_path: Path) -> None:
    """A row lost from the docs is an unexplained finding again."""
    doc = tmp_path / "findings.md"
    doc.write_text(
        "| scanner | rule | where | why |\n|---|---|---|---|\n"
        "| bandit | B105 | `infra/local/twilio_emulator.py` | a local stand-in's token |\n",
        encoding="utf-8",
    )
    explained = explained_findings(doc)
    assert explained == {("bandit", "B105", "infra/local/twilio_emulator.py")}
    finding = Finding("bandit", "B104", "infra/local/stack.py", "MEDIUM")
    assert (finding.scanner, finding.rule, finding.where) not in explained

"""Security scans, with their figures: `uv run python -m infra.security_scan`.

Runs cfn-lint and checkov on template.yaml, bandit on our code (library, handlers, local tooling)
and pip-audit on every locked dependency, and prints one row per scanner: findings by severity,
how many docs/security-findings.md explains, how many it does not. Exits 1 if any finding is high
severity or unexplained. checkov runs in its own environment through `uvx` (it pins many packages
of its own, so it is not a project dependency). The test suite runs the offline scanners (cfn-lint,
checkov, bandit) on every run; pip-audit asks PyPI's advisory database, whose answers change
without our code changing, so it is this command's job (run it before a release).
"""

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
FINDINGS_DOC = ROOT / "docs" / "security-findings.md"
CHECKOV = "checkov==3.3.30"
BANDIT_TARGETS = ["layers/onboarding/onboarding", "functions", "infra"]


@dataclass(frozen=True)
class Finding:
    scanner: str
    rule: str
    where: str
    severity: str  # HIGH, MEDIUM, LOW, or UNRATED (checkov without a platform key rates nothing)


@dataclass
class ScanResult:
    scanner: str
    version: str
    findings: list[Finding] = field(default_factory=list)


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603


def explained_findings(doc: Path = FINDINGS_DOC) -> set[tuple[str, str, str]]:
    """(scanner, rule, where) of each row of the findings table in docs/security-findings.md."""
    rows = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] in {"bandit", "checkov", "pip-audit", "cfn-lint"}:
            rows.add((cells[0], cells[1], cells[2]))
    return rows


def bandit() -> ScanResult:
    report = json.loads(_run([sys.executable, "-m", "bandit", "-q", "-r", *BANDIT_TARGETS, "-f", "json"]).stdout)
    version = _run([sys.executable, "-m", "bandit", "--version"]).stdout.split()[1]
    findings = [Finding("bandit", r["test_id"], r["filename"], r["issue_severity"].upper()) for r in report["results"]]
    return ScanResult("bandit", version, findings)


def checkov() -> ScanResult:
    output = _run(["uvx", "--quiet", CHECKOV, "-f", "template.yaml", "--framework", "cloudformation", "-o", "json"])
    report = json.loads(output.stdout)
    report = report[0] if isinstance(report, list) else report
    findings = [
        Finding("checkov", c["check_id"], c["resource"], (c.get("severity") or "UNRATED").upper())
        for c in report["results"]["failed_checks"]
    ]
    return ScanResult("checkov", CHECKOV.split("==")[1], findings)


def cfn_lint() -> ScanResult:
    output = _run([str(Path(sys.executable).with_name("cfn-lint")), "--format", "json", "template.yaml"])
    version = _run([str(Path(sys.executable).with_name("cfn-lint")), "--version"]).stdout.split()[-1]
    severity = {"Error": "HIGH", "Warning": "MEDIUM", "Informational": "LOW"}
    findings = [
        Finding(
            "cfn-lint",
            m["Rule"]["Id"],
            m["Location"]["Path"][1] if len(m["Location"]["Path"]) > 1 else "-",
            severity.get(m["Level"], "HIGH"),
        )
        for m in json.loads(output.stdout or "[]")
    ]
    return ScanResult("cfn-lint", version, findings)


def pip_audit() -> ScanResult:
    """Every package uv.lock pins (runtime and dev), against PyPI's advisories."""
    with tempfile.TemporaryDirectory() as folder:
        requirements = Path(folder) / "requirements.txt"
        exported = _run(["uv", "export", "--frozen", "--all-groups", "--no-hashes", "--no-emit-project"]).stdout
        requirements.write_text(exported, encoding="utf-8")
        output = _run(
            [
                sys.executable,
                "-m",
                "pip_audit",
                "-r",
                str(requirements),
                "--no-deps",
                "--disable-pip",
                "-f",
                "json",
                "--progress-spinner",
                "off",
            ]
        )
    report = json.loads(output.stdout)
    version = re.sub(r"^pip-audit ", "", _run([sys.executable, "-m", "pip_audit", "--version"]).stdout.strip())
    findings = [
        # PyPI's advisories carry no severity; any known vulnerability counts as high until explained.
        Finding("pip-audit", vuln["id"], dependency["name"], "HIGH")
        for dependency in report["dependencies"]
        for vuln in dependency.get("vulns", [])
    ]
    return ScanResult("pip-audit", version, findings)


def main() -> int:
    explained = explained_findings()
    failed = False
    print(
        f"{'scanner':<10} {'version':<9} {'high':>5} {'medium':>7} {'low':>5} {'unrated':>8} "
        f"{'explained':>10} {'unexplained':>12}"
    )
    for result in (cfn_lint(), checkov(), bandit(), pip_audit()):
        counts = {
            level: sum(f.severity == level for f in result.findings) for level in ("HIGH", "MEDIUM", "LOW", "UNRATED")
        }
        unexplained = [f for f in result.findings if (f.scanner, f.rule, f.where) not in explained]
        failed = failed or bool(unexplained)
        print(
            f"{result.scanner:<10} {result.version:<9} {counts['HIGH']:>5} {counts['MEDIUM']:>7} "
            f"{counts['LOW']:>5} {counts['UNRATED']:>8} {len(result.findings) - len(unexplained):>10} "
            f"{len(unexplained):>12}"
        )
        for finding in unexplained:
            print(f"  unexplained: {finding.rule} {finding.where} ({finding.severity})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

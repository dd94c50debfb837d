"""docs/benchmark.md is a full run of `uv run python -m infra.benchmark --out docs` from a commit no
more than a few domain commits behind this one: a change to the product (layers/ or functions/)
that several commits left unmeasured fails here, until the document is written again. Commits
that touch only tests, docs or tooling do not count: they change nothing the benchmark measures."""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.bench.benchmark.__main__ import SECTIONS

REPO = Path(__file__).parents[2]
DOCS = REPO / "docs"
DOMAIN = ("layers", "functions")  # what the benchmark measures: the product's code and its build
MOST_DOMAIN_COMMITS_BEHIND = 3


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DOCS / "benchmark.json").read_text(encoding="utf-8"))
    return loaded


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)  # noqa: S603, S607


def domain_commits_since(commit: str, repo: Path = REPO) -> int:
    """Commits after `commit` up to HEAD that touch the product's code or its build."""
    completed = _git(repo, "rev-list", "--count", f"{commit}..HEAD", "--", *DOMAIN)
    if completed.returncode != 0:
        shallow = _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        if shallow:
            pytest.skip(f"a shallow clone holds no commit {commit} to count from")
        raise AssertionError(f"docs/benchmark.json names commit {commit}, which this repository does not have")
    return int(completed.stdout)


def test_the_document_is_a_full_run_from_a_recent_commit(figures: dict[str, Any]) -> None:
    source = figures["provenance"]
    assert figures["quick"] is False, "docs/benchmark.md is a --quick run"
    assert list(figures["sections"]) == list(SECTIONS), "docs/benchmark.md lacks sections: run them all"
    assert not source["uncommitted_changes"], "docs/benchmark.md was measured on a tree with uncommitted changes"
    behind = domain_commits_since(source["commit"])
    assert behind <= MOST_DOMAIN_COMMITS_BEHIND, (
        f"docs/benchmark.md was measured at {source['commit']}, {behind} commits to layers/ or functions/ ago: "
        "run `uv run python -m infra.benchmark --out docs` again"
    )


def test_the_document_names_what_it_was_measured_on(figures: dict[str, Any]) -> None:
    source, report = figures["provenance"], (DOCS / "benchmark.md").read_text(encoding="utf-8")
    assert f"Measured at commit `{source['commit']}`" in report
    assert f"Python {source['python']}" in report
    assert f"{source['cpus']} CPUs, load average" in report
    for section in figures["sections"].values():  # every goal's figure and verdict, as measured
        for figure, goal, measured, _ in section["rows"]:
            assert f"| {figure} | {goal} | {measured} |" in report


def test_a_commit_to_the_product_counts_and_one_to_the_docs_does_not(tmp_path: Path) -> None:
    """The count the staleness check relies on, in a repository of its own."""

    def git(*args: str) -> str:
        return _git(tmp_path, *args).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "bench@example.com")
    git("config", "user.name", "bench")
    for number, folder in enumerate(["docs", "layers", "docs", "functions", "tests"]):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / "file.txt").write_text(str(number), encoding="utf-8")
        git("add", "-A")
        git("commit", "-q", "-m", f"change {folder}")
        if number == 0:
            measured = git("rev-parse", "HEAD")
    assert domain_commits_since(measured, tmp_path) == 2  # layers/ and functions/, not docs/ nor tests/

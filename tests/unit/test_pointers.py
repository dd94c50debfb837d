"""What the docs and the code's comments point at is in the tree, and the comments say the rule,
not where it came from or what it replaced.

A pointer is a file path (in backticks, or bare with a file extension and at least one folder) or a
backticked dotted name (`module.name`, `Class.method`). A path resolves when a file or folder of
the tree ends with it (docs name library paths from the library's root, test paths from tests/);
a dotted name resolves when each of its parts is a name the tree defines (a module, a class, a
function, an argument, an assignment), or the chain imports from an installed library. So a rename
that leaves a pointer behind fails here, wherever the pointer is.
"""

import ast
import builtins
import importlib
import io
import os
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CODE_ROOTS = ("layers", "functions", "infra", "tests")
NOT_THE_TREE = {".git", ".venv", "node_modules", "__pycache__", ".local", ".aws-sam", ".mypy_cache", ".ruff_cache"}
NOT_THE_TREE |= {".pytest_cache", ".hypothesis"}

# What looks like a pointer but names nothing of this tree, and why.
OUTSIDE_THE_TREE = {
    "aws/ssm": "an AWS managed KMS key alias",
    "aws/sns": "an AWS managed KMS key alias",
    "aws/aws-lambda-web-adapter": "a public repository",
    "logs/local_stack.log": "written by the local stack at run time",
    "dynamodb.vectors.json": "written by the local stack at run time",
    "dynamodb.journal.jsonl": "written by the local stack at run time",
    "data/locomo10.zip": "LoCoMo's download",
    "locomo10.json": "LoCoMo's data file",
    "task_eval/evaluation.py": "LoCoMo's own scorer",
    "no_profile/no_gap": "a flag combination's label",
    "no_summary/no_gap": "a flag combination's label",
    "provided.al2023": "a Lambda runtime's name",
    "messages.create": "Twilio's REST call",
    "authorizer.claims.sub": "a field of API Gateway's request context",
    "cloudwatch.amazonaws.com": "a service principal",
}
MEDIA_TYPE = re.compile(r"(?:text|application|image)/[\w.+-]+")
_EXTENSION = r"\.(?:py|md|toml|yaml|yml|json|jsonl|sh|txt|html|css|js|svg|png|zip|csv|lock|cfg|ini)"
BACKTICKED = re.compile(r"`([^`\s]+?)(?:\(\))?`")
PATH_TOKEN = re.compile(rf"[\w.-]*(?:/[\w.-]*)+|[\w.-]+{_EXTENSION}")
BARE_PATH = re.compile(rf"(?<![\w./`:-])((?:[\w-]+/)+[\w.-]+{_EXTENSION})\b")
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _tree() -> tuple[set[str], set[str]]:
    paths: set[str] = set()
    for root, folders, files in os.walk(REPO):
        folders[:] = [folder for folder in folders if folder not in NOT_THE_TREE]
        relative = Path(root).relative_to(REPO).as_posix()
        if relative != ".":
            paths.add(relative)
        paths.update(f"{relative}/{name}".removeprefix("./") for name in files)
    return paths, {path.rsplit("/", 1)[-1] for path in paths}


@cache
def tree() -> tuple[frozenset[str], frozenset[str]]:
    paths, names = _tree()
    return frozenset(paths), frozenset(names)


@cache
def defined_names() -> frozenset[str]:
    """Every name the tree's Python defines or imports, and its modules' and folders' names."""
    paths, names = tree()
    found = {name.removesuffix(".py") for name in names}
    for path in paths:
        if path.endswith(".py") and path.split("/", 1)[0] in CODE_ROOTS:
            for node in ast.walk(ast.parse((REPO / path).read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    found.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    found.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    found.add(node.attr)
                elif isinstance(node, ast.arg):
                    found.add(node.arg)
                elif isinstance(node, ast.Import | ast.ImportFrom):
                    found.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(found)


def path_resolves(pointer: str) -> bool:
    paths, names = tree()
    wanted = pointer.rstrip("/")
    if "/" not in wanted:
        return wanted in names
    # `recall/indexer` names the module recall/indexer.py
    return any(path in (wanted, f"{wanted}.py") or path.endswith((f"/{wanted}", f"/{wanted}.py")) for path in paths)


def _imports(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def dotted_resolves(pointer: str) -> bool:
    known = defined_names()
    return all(part in known or hasattr(builtins, part) for part in pointer.split(".")) or _imports(pointer)


def pointers(text: str) -> Iterator[tuple[str, str]]:
    """(kind, pointer) for each pointer in `text`."""
    for match in BACKTICKED.finditer(text):
        token = match.group(1)
        if token.startswith((".", "/", "http", "~", "$")) or token in OUTSIDE_THE_TREE or MEDIA_TYPE.fullmatch(token):
            continue
        if PATH_TOKEN.fullmatch(token) and not token.startswith("-"):
            yield "path", token
        elif DOTTED.fullmatch(token):
            yield "name", token
    for match in BARE_PATH.finditer(text):
        if match.group(1) not in OUTSIDE_THE_TREE:
            yield "path", match.group(1)


def stale(text: str) -> list[str]:
    return [
        pointer
        for kind, pointer in pointers(text)
        if not (path_resolves(pointer) if kind == "path" else dotted_resolves(pointer))
    ]


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs").glob("decisions/*.md"))]


def code_files() -> list[Path]:
    paths, _ = tree()
    return [
        REPO / path
        for path in sorted(paths)
        if path.endswith(".py") and path.split("/", 1)[0] in CODE_ROOTS and path != "tests/unit/test_pointers.py"
    ]


def comments(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring-like string of a Python file."""
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if token.type == tokenize.COMMENT or (
            token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        ):
            yield token.start[0], token.string


def test_every_pointer_in_the_docs_is_in_the_tree() -> None:
    found = [f"{doc.relative_to(REPO)}: {pointer}" for doc in documents() for pointer in stale(doc.read_text("utf-8"))]
    assert found == []


def test_every_pointer_in_a_comment_is_in_the_tree() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {pointer}"
        for path in code_files()
        for line, text in comments(path)
        for pointer in stale(text)
    ]
    assert found == []


@pytest.mark.parametrize(
    "written",
    [
        "see `persistence/writing.py`",  # a module gone from the library
        "(llm/prompt_fitting.py)",  # bare, in a comment
        "`tests/unit/test_store_breaker.py`",  # a test file that is not there
        "the guard (`writing.erasure_guard`)",  # a dotted name whose module is gone
        "`infra/local/no_such_folder/`",  # a folder
    ],
)
def test_a_made_up_stale_pointer_is_found(written: str) -> None:
    assert stale(written), written


@pytest.mark.parametrize(
    "written",
    [
        "`persistence/writes.py`",
        "`tests/unit/test_pointers.py`",
        "`TurnService.handle_turn` in `turn/service.py`",
        "`time.monotonic`",
        "`text/event-stream`",
        "`infra/local/`",
    ],
)
def test_a_pointer_that_is_there_passes(written: str) -> None:
    assert stale(written) == [], written


# What a comment may not say: where a rule came from (a document outside the repository) or what
# the code did before (git has that). Say the rule in the present.
CITATION = re.compile(
    r"\b(?:issue|seed|spec) \d+|seeds/|\bthe (?:spec|seed)(?:'s|’s)?\b"
    r"|\bdesign card|\brequirement \d|\bR\d+(?:\.\d+)?\b",
    re.IGNORECASE,
)
NARRATION = re.compile(
    r"(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bbeen )\bused to\b|\bno longer\b|\bany ?more\b|\(was\b"
    r"|\bwas\b[^.;:\n]{0,40}\bnow\b",
    re.IGNORECASE,
)


def refused(text: str) -> list[str]:
    return [match.group(0) for pattern in (CITATION, NARRATION) for match in pattern.finditer(text)]


def test_no_comment_cites_a_document_outside_the_repository_or_narrates_history() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}: {said}"
        for path in code_files()
        for line, text in comments(path)
        for said in refused(text)
    ]
    assert found == []


def test_no_doc_keeps_a_former_name_beside_the_present_one() -> None:
    found = [f"{doc.relative_to(REPO)}" for doc in documents() if "(was " in doc.read_text("utf-8")]
    assert found == []


@pytest.mark.parametrize(
    "written",
    [
        "# see issue 12",
        "# as the spec's example says",
        "# the design card's 20",
        "(Validates R4.2.)",
        "# Requirement 3.5",
        "# it used to take 100 s",
        "# moto no longer has it",
        "# the key (was `lease`)",
        "# this was a list, now a tuple",
    ],
)
def test_the_comment_guard_refuses_each_kind(written: str) -> None:
    assert refused(written), written


@pytest.mark.parametrize("written", ["# the key is used to sign the request", "# a retry was sent: count it"])
def test_the_comment_guard_lets_a_present_rule_through(written: str) -> None:
    assert refused(written) == [], written

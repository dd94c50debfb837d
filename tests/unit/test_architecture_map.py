"""docs/architecture.md describes the code as it is, both ways: every module of the library and of
the functions is named in its module tables, and every module those tables name exists; every path
its layout table gives, every module a row names under its path (a parenthesis after a folder's path
names that folder's own), and every file path in its prose (the library's paths, as it writes
them, are from the library's root) exists in the repository."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
LIBRARY = REPO / "layers" / "onboarding" / "onboarding"

# What a module or path looks like in backticks: lower-case words, `/`, `.`, `_`, `-`; not a class
# (`TurnService`), an option (`--aws`), a route (`/docs`) or a call.
_NAME = re.compile(r"[a-z0-9_][a-z0-9_./-]*")
_FILE_PATH = re.compile(r"[a-z0-9_][a-z0-9_./-]*(/|\.(py|md|sh|yaml|json|toml))")
_TOKEN = re.compile(r"`([^`]*)`|(\()|(\))")


def _layout_rows(text: str) -> list[tuple[str, str]]:
    """The layout table's rows: (path cell, what cell)."""
    section = text.split("## Layout of the repository", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 2:
            rows.append((cells[0], cells[1]))
    return rows


def _named_in(what: str, base: str) -> Iterator[str]:
    """The paths a row's description names: each name under the row's path, or under the folder
    whose parenthesis it sits in."""
    bases = [base]
    last_folder: str | None = None
    for match in _TOKEN.finditer(what):
        name, opening, closing = match.groups()
        if opening:
            bases.append(last_folder or bases[-1])
            last_folder = None
        elif closing:
            if len(bases) > 1:
                bases.pop()
            last_folder = None
        elif name is not None and _NAME.fullmatch(name):
            path = f"{bases[-1]}{name}"
            yield path
            last_folder = path if name.endswith("/") and what[match.end() :].startswith(" (") else None
        else:
            last_folder = None


def _exists(path: str, roots: tuple[Path, ...] = (REPO,)) -> bool:
    return any((root / path).exists() or (root / f"{path}.py").exists() for root in roots)


def named_paths(text: str) -> list[str]:
    """Every repository path the document names, as it names it (relative to the repository)."""
    paths = []
    for path_cell, what in _layout_rows(text):
        for row_path in re.findall(r"`([^`]+)`", path_cell):
            paths.append(row_path)
            if row_path.endswith("/"):
                paths.extend(_named_in(what, row_path))
    return paths


def prose_paths(text: str) -> list[str]:
    """File paths named outside the layout table (the library's from its own root)."""
    prose = "\n".join(line for line in text.splitlines() if not line.startswith("| `"))
    return sorted({name for name in re.findall(r"`([^`]*)`", prose) if _FILE_PATH.fullmatch(name)})


def missing(text: str) -> list[str]:
    absent = [path for path in named_paths(text) if not _exists(path)]
    absent += [path for path in prose_paths(text) if not _exists(path, (REPO, LIBRARY))]
    return absent


def test_every_path_and_module_the_architecture_names_exists() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert len(named_paths(text)) > 60, "the layout table was read"  # the parser found the map
    assert missing(text) == []


@pytest.mark.parametrize(
    ("written", "renamed", "reported"),
    [
        ("`gateway` (API", "`no_gateway` (API", "infra/local/no_gateway"),  # a module of a row
        ("`coach`, `reading`", "`no_coach`, `reading`", "infra/local/bedrock_emulator/no_coach"),  # in a parenthesis
        ("`benchmark/` (the", "`no_benchmark/` (the", "infra/bench/no_benchmark/"),  # a folder of a row
        ("| `infra/local/iam/` |", "| `infra/local/no_iam/` |", "infra/local/no_iam/"),  # a row's own path
        ("`llm/converse.py` turns", "`llm/no_converse.py` turns", "llm/no_converse.py"),  # a path in the prose
    ],
)
def test_a_renamed_module_is_reported(written: str, renamed: str, reported: str) -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert written in text
    assert reported in missing(text.replace(written, renamed, 1))


def _table(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def documented_modules(text: str) -> set[str]:
    """The modules the two module tables name, from the repository's root."""
    library = re.findall(r"`([a-z0-9_/]+\.py)`", _table(text, "## The library, module by module"))
    functions = re.findall(r"`(functions/[a-z0-9_/]+\.py)`", _table(text, "## The functions"))
    return {f"layers/onboarding/onboarding/{path}" for path in library} | set(functions)


def code_modules() -> set[str]:
    """Every module of the library and the functions, but a package's `__init__.py` that holds only
    its docstring (nothing to find there)."""
    found = set()
    for root in (LIBRARY, REPO / "functions"):
        for path in root.rglob("*.py"):
            if path.name == "__init__.py" and len(ast.parse(path.read_text(encoding="utf-8")).body) <= 1:
                continue
            found.add(str(path.relative_to(REPO)))
    return found


def test_every_module_is_named_and_every_name_is_a_module() -> None:
    named, modules = documented_modules(ARCHITECTURE.read_text(encoding="utf-8")), code_modules()
    assert len(modules) > 70
    assert sorted(modules - named) == [], "modules docs/architecture.md does not name"
    assert sorted(named - modules) == [], "modules docs/architecture.md names that do not exist"


def test_a_module_left_out_of_the_map_or_gone_from_the_code_is_found() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert "| `summary.py` |" in text
    dropped = documented_modules(text.replace("| `summary.py` |", "| summary |", 1))
    assert "layers/onboarding/onboarding/summary.py" in code_modules() - dropped
    renamed = documented_modules(text.replace("`summary.py`", "`summaries.py`", 1))
    assert "layers/onboarding/onboarding/summaries.py" in renamed - code_modules()

"""No import circle anywhere: the product (layers/ and functions/), the local tooling (infra/) and
the tests; and the local stack and the console (infra/local/, infra/console/) never depend on the
measurements (infra/bench/), which are built on them. A module's imports are read with `ast`,
counting those inside functions and under TYPE_CHECKING too (a lazy import or a type-only one is
still a dependency a reader has to follow)."""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Each folder of code, and the folder its import names start from.
FOLDERS = {
    REPO / "layers" / "onboarding" / "onboarding": REPO / "layers" / "onboarding",
    REPO / "functions": REPO,
    REPO / "infra": REPO,
    REPO / "tests": REPO,
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_in(*folders: str) -> dict[str, Path]:
    """Every module under the named top folders (all of them when none is named), by its import name
    (dynalite's node_modules, where a benchmark has installed it, is not ours)."""
    return {
        _module_name(path, root): path
        for folder, root in FOLDERS.items()
        if not folders or folder.relative_to(REPO).parts[0] in folders
        for path in sorted(folder.rglob("*.py"))
        if "node_modules" not in path.parts
    }


def _imported_names(tree: ast.Module, module: str, is_package: bool) -> Iterator[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):  # every import, at any depth: in functions, under `if TYPE_CHECKING`
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports (a name that is no module counts as its nearest
    enclosing one, so `from onboarding.config import Settings` depends on `onboarding.config`)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets: set[str] = set()
        for name in _imported_names(tree, module, path.name == "__init__.py"):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            # A package's own __init__ is imported by each of its modules anyway: not an edge.
            if name and name != module and not module.startswith(f"{name}."):
                targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_product_the_tooling_and_the_tests() -> None:
    graph = import_graph(modules_in())
    assert "onboarding.config" in graph["onboarding.composition"]
    assert any(module.startswith("functions.") for module in graph)
    assert "infra.local.stack" in graph["infra.local_stack"]
    assert "onboarding.telemetry" in graph["tests.unit.test_telemetry"]


def test_a_circle_is_found_however_it_is_imported() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_circle_anywhere() -> None:
    found = cycles(import_graph(modules_in()))
    listed = "\n".join(" <-> ".join(cycle) for cycle in found)
    assert not found, f"import circles:\n{listed}"


def reached_from(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` depends on, directly or through others."""
    seen: set[str] = set()
    waiting = [start]
    while waiting:
        for target in graph.get(waiting.pop(), ()):
            if target not in seen:
                seen.add(target)
                waiting.append(target)
    return seen


def test_the_local_stack_and_the_console_never_depend_on_the_measurements() -> None:
    graph = import_graph(modules_in("infra", "layers"))
    local = [module for module in graph if module.split(".")[:2] in (["infra", "local"], ["infra", "console"])]
    assert len(local) > 40  # the scan found the local stack's modules, not a handful
    found = {
        module: sorted(target for target in reached_from(graph, module) if target.startswith("infra.bench"))
        for module in local
    }
    assert not {module: targets for module, targets in found.items() if targets}


def test_a_dependency_through_another_module_counts() -> None:
    graph = {"infra.local.a": {"infra.b"}, "infra.b": {"infra.bench.c"}, "infra.bench.c": set()}
    assert reached_from(graph, "infra.local.a") == {"infra.b", "infra.bench.c"}


@pytest.mark.parametrize("source", ["import onboarding.y", "from onboarding import y", "from . import y"])
def test_every_import_form_is_an_edge(source: str, tmp_path: Path) -> None:
    package = tmp_path / "onboarding"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "y.py").write_text("")
    (package / "x.py").write_text(f"def late() -> None:\n    {source}\n")
    modules = {_module_name(p, tmp_path): p for p in package.rglob("*.py")}
    assert import_graph(modules)["onboarding.x"] == {"onboarding.y"}

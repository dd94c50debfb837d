"""No code picks a port number and binds it later: "bind to 0, close, use the number" lets any
process take the port in between (two xdist workers' stacks were once handed the same one). Each
server binds its own socket, on 0 or the port given, and the port is read from that bound socket
(infra/local/ports.py). This reads every Python file of infra/ and tests/ for the pattern."""

import ast
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _binds_port_zero(call: ast.Call) -> bool:
    """`x.bind((host, 0))` or `socket.create_server((host, 0))`."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in ("bind", "create_server") or not call.args:
        return False
    address = call.args[0]
    return (
        isinstance(address, ast.Tuple)
        and len(address.elts) >= 2
        and isinstance(address.elts[1], ast.Constant)
        and address.elts[1].value == 0
    )


def _reads_port(node: ast.AST) -> bool:
    return any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "getsockname"
        for call in ast.walk(node)
    )


def _names(node: ast.AST) -> set[str]:
    return {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}


def _kept(node: ast.AST) -> set[str]:
    """The names `node` hands on as objects: not those it only reads a port from (a socket's `getsockname()`)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getsockname":
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    return set().union(*(_kept(child) for child in ast.iter_child_nodes(node)))


def _port_names(scope: ast.AST) -> dict[str, int]:
    """Names assigned a port read from a socket, with the line of the assignment."""
    assigned: dict[str, int] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _reads_port(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in _names(target):
                    assigned[name] = node.lineno
    return assigned


def _socket_names(scope: ast.AST) -> set[str]:
    """Names of the sockets bound to port 0 in `scope`."""
    bound = set()
    for call in ast.walk(scope):
        if isinstance(call, ast.Call) and _binds_port_zero(call) and isinstance(call.func, ast.Attribute):
            bound |= _names(call.func.value)
    return bound


def released_ports(source: str) -> list[str]:
    """Where `source` reads the port of a socket it bound to 0 and uses the number once the socket
    is gone: returned from a function that does not keep the socket open (no `yield`, the socket
    not returned with it), or used after the `with` block that closed it, or after its `close()`."""
    found = []
    tree = ast.parse(source)
    for function in (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)):
        if not any(isinstance(call, ast.Call) and _binds_port_zero(call) for call in ast.walk(function)):
            continue
        ports, sockets = _port_names(function), _socket_names(function)
        generator = any(isinstance(node, ast.Yield | ast.YieldFrom) for node in ast.walk(function))
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None and not generator:
                returned = _names(node.value)
                if (_reads_port(node.value) or returned & set(ports)) and not _kept(node.value) & sockets:
                    found.append(f"{function.name}:{node.lineno} returns a port whose socket it closes")
            if isinstance(node, ast.With) and any(
                item.optional_vars is not None and _names(item.optional_vars) & sockets for item in node.items
            ):
                inside = {name for name, line in ports.items() if node.lineno <= line <= (node.end_lineno or 0)}
                for later in ast.walk(function):
                    if (
                        isinstance(later, ast.Name)
                        and isinstance(later.ctx, ast.Load)
                        and later.id in inside
                        and later.lineno > (node.end_lineno or 0)
                    ):
                        found.append(f"{function.name}:{later.lineno} uses {later.id} after its socket closed")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "close"
                and _names(node.func.value) & sockets
            ):
                for later in ast.walk(function):
                    if (
                        isinstance(later, ast.Name)
                        and isinstance(later.ctx, ast.Load)
                        and later.id in ports
                        and ports[later.id] < node.lineno < later.lineno
                    ):
                        found.append(f"{function.name}:{later.lineno} uses {later.id} after its socket closed")
    return found


RELEASED = {
    "returned from a with block": """
        def any_port(host="127.0.0.1"):
            with socket.socket() as probe:
                probe.bind((host, 0))
                return int(probe.getsockname()[1])
    """,
    "read, then used after the with": """
        def test_something():
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            start_server(port)
    """,
    "read, closed, returned": """
        def pick():
            probe = socket.socket()
            probe.bind(("", 0))
            port = probe.getsockname()[1]
            probe.close()
            return port
    """,
    "read, closed, used": """
        def test_other():
            probe = socket.socket()
            probe.bind(("", 0))
            port = probe.getsockname()[1]
            probe.close()
            run("--port", str(port))
    """,
}

HELD = {
    "yielded while bound": """
        def unanswered_port():
            with socket.socket() as held:
                held.bind(("127.0.0.1", 0))
                yield int(held.getsockname()[1])
    """,
    "used inside the with": """
        def test_silent():
            with socket.socket() as silent:
                silent.bind(("127.0.0.1", 0))
                silent.listen()
                url = f"http://127.0.0.1:{silent.getsockname()[1]}"
                call(url)
    """,
    "returned with its socket": """
        def listening():
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            return listener, listener.getsockname()[1]
    """,
}


@pytest.mark.parametrize("case", RELEASED)
def test_the_check_finds_each_way_of_letting_a_port_go(case: str) -> None:
    assert released_ports(textwrap.dedent(RELEASED[case])), case


@pytest.mark.parametrize("case", HELD)
def test_the_check_leaves_a_port_that_stays_bound(case: str) -> None:
    assert released_ports(textwrap.dedent(HELD[case])) == [], case


# Spelled in two parts so that `grep -rn` for the retired helper's name finds nothing, this file included.
RETIRED_HELPER = "_".join(("free", "port"))


def test_no_code_in_infra_or_tests_picks_a_port_and_binds_it_later() -> None:
    found = []
    for path in sorted([*(REPO / "infra").rglob("*.py"), *(REPO / "tests").rglob("*.py")]):
        source = path.read_text(encoding="utf-8")
        relative = path.relative_to(REPO)
        if path != Path(__file__):  # this file's cases hold the pattern on purpose
            found += [f"{relative}:{where}" for where in released_ports(source)]
        if RETIRED_HELPER in source:
            found.append(f"{relative}: {RETIRED_HELPER}")
    assert found == []

"""dynalite (a DynamoDB server on LevelDB, from npm) in a child process, for the store comparison.

moto's Query walks its whole table, so on moto every store's reads slow down as the table grows,
whatever the store does. dynalite keeps each table in a sorted key-value store and reads a Query's
key range only, as DynamoDB does, so its figures show how a store's own cost grows. It has no
TransactWriteItems, which the plain turn the comparison makes does not need (a Query and two
PutItems). The package is pinned in infra/bench/node/package.json and installed there with `npm ci` on
first use; Node.js must be on PATH.
"""

import shutil
import subprocess
from pathlib import Path
from types import TracebackType

from infra.local.dynamodb_process import end_child, wait_until_listening
from infra.local.errors import LocalToolError
from infra.local.ports import free_port

NODE_DIR = Path(__file__).parents[1] / "node"


def require_node(what: str) -> None:
    """DynaliteUnavailableError (one line, exit 2) unless Node.js and npm are on PATH."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise DynaliteUnavailableError(
            f"{what}, which needs Node.js and npm on PATH; install them (e.g. apt install nodejs npm), "
            "or run with --quick"
        )


CLI = NODE_DIR / "node_modules" / "dynalite" / "cli.js"


class DynaliteUnavailableError(LocalToolError):
    """Node.js or npm is missing, or the package could not be installed."""


def install() -> Path:
    """The dynalite CLI script, installed from the lock file if it is not there yet."""
    if CLI.exists():
        return CLI
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise DynaliteUnavailableError("the store comparison runs dynalite, which needs Node.js and npm on PATH")
    completed = subprocess.run(  # noqa: S603 - npm, on the project's own lock file
        [npm, "ci", "--no-audit", "--no-fund", "--silent"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if completed.returncode != 0 or not CLI.exists():
        raise DynaliteUnavailableError(f"npm ci failed in {NODE_DIR.name}/: {completed.stderr.strip()[-500:]}")
    return CLI


class LocalDynalite:
    """`with LocalDynalite() as server:` serves DynamoDB at `server.url` until the block ends."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = free_port(host)  # dynalite reads --port 0 as "use 4567", so pick one ourselves
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> "LocalDynalite":
        node = shutil.which("node")
        cli = install()
        if node is None:
            raise DynaliteUnavailableError("the store comparison runs dynalite, which needs Node.js on PATH")
        self._process = subprocess.Popen(  # noqa: S603 - node, on the pinned package's own CLI
            # Tables are ACTIVE at once (dynalite makes them wait 500 ms by default, like DynamoDB).
            [node, str(cli), "--host", self.host, "--port", str(self.port), "--createTableMs", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until_listening(self._process, self.host, self.port, timeout_s=30)
        except RuntimeError as error:
            self._stop()
            raise DynaliteUnavailableError(f"dynalite {error}") from None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._process is not None:
            end_child(self._process)
        self._process = None

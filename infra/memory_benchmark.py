"""`python -m infra.memory_benchmark`: the README's command for the memory benchmark, kept at the
top of infra/ so the documented command works unchanged; the benchmark itself is in
infra/bench/memory_benchmark/."""

import sys

from infra.bench.memory_benchmark.__main__ import main
from infra.local.errors import run_tool

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(run_tool(main))

"""`python -m infra.benchmark`: the README's command for the benchmarks, kept at the top of infra/ so
the documented command works unchanged; the benchmarks themselves are in infra/bench/benchmark/."""

import sys

from infra.bench.benchmark.__main__ import main
from infra.local.errors import run_tool

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(run_tool(main))

"""`python -m infra.cost`: the documented command for the cost ledger, kept at the top of infra/ so it
works unchanged; the ledger, its prices and its report are in infra/bench/cost/."""

import sys

from infra.bench.cost.__main__ import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

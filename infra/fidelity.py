"""`python -m infra.fidelity`: the documented command for the memory fidelity evaluation, kept at the
top of infra/ so it works unchanged; the evaluation itself is in infra/bench/fidelity.py."""

import sys

from infra.bench.fidelity import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())

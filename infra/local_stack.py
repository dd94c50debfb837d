"""`python -m infra.local_stack`: the README's command for the embedded local stack, kept at the top of
infra/ so the documented command works unchanged; the stack is infra/local/stack.py, the command's
options and output infra/local/stack_command.py."""

import sys

from infra.local.errors import run_tool
from infra.local.stack_command import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(run_tool(main, stopped="Stopped while starting; the data file is as it was."))

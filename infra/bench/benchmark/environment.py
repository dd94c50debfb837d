"""Environment variables set (or, for None, unset) for the length of a `with` block, then put back as they were."""

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def temporary_environment(values: Mapping[str, str | None]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

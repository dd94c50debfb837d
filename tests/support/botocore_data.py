"""One read of botocore's service data per test process.

moto's `mock_aws` starts every test on a fresh botocore session, and each session's loader reads
and parses each service's JSON model again (endpoints, partitions, retry rules, the service): about
0.1 s a client, most of a unit test's set-up, and most of the unit tier's time. The files do not
change while the tests run, so every loader with the same search paths shares one cache, exactly
as one session's clients share their loader's. Nothing here changes what a client does.
"""

from typing import Any

from botocore import loaders

_SHARED: dict[tuple[str, ...], dict[Any, Any]] = {}


def install() -> None:
    """From now on, loaders with the same search paths share their cache (idempotent)."""
    if getattr(loaders.Loader.__init__, "shares_cache", False):
        return
    original = loaders.Loader.__init__

    def __init__(self: loaders.Loader, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - replaces __init__
        original(self, *args, **kwargs)
        self._cache = _SHARED.setdefault(tuple(self.search_paths), {})  # type: ignore[attr-defined]

    __init__.shares_cache = True  # type: ignore[attr-defined]
    loaders.Loader.__init__ = __init__  # type: ignore[method-assign]

"""The one percentile every benchmark section reports with."""

import statistics


def percentile(values: list[float], percent: int) -> float:
    """The inclusive `percent`th percentile (the median of one value is itself)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]

"""Owns the CloudWatch metrics the code emits, as Embedded Metric Format log lines.

Each call flushes at once (Powertools' `EphemeralMetrics`): the mobile API runs under Lambda Web
Adapter, so there is no handler decorator at the end of an invocation to flush a batch. Setting
`POWERTOOLS_METRICS_DISABLED=true` silences them (the local terminal tools do).
"""

import os
from collections.abc import Mapping

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

DEFAULT_NAMESPACE = "OnboardingMemory"


def emit(
    values: Mapping[str, tuple[MetricUnit, float]],
    dimensions: Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    """One EMF line holding `values` (name -> unit, value), with the service dimension and
    `dimensions`, and `properties`: fields of the line that are no dimension (no new metric;
    Logs Insights reads them, e.g. the rollout arm, docs/rollout.md)."""
    metrics = EphemeralMetrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE)
    metrics.add_dimension(name="service", value=os.environ.get("POWERTOOLS_SERVICE_NAME") or "onboarding-memory")
    for name, value in (dimensions or {}).items():
        metrics.add_dimension(name=name, value=value)
    for name, text in (properties or {}).items():
        metrics.add_metadata(key=name, value=text)
    for name, (unit, amount) in values.items():
        metrics.add_metric(name=name, unit=unit, value=amount)
    metrics.flush_metrics()


def count_metric(name: str) -> None:
    """Add 1 to the metric `name` (a CloudWatch metric in the configured namespace)."""
    emit({name: (MetricUnit.Count, 1)})

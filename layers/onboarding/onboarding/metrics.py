"""Owns the CloudWatch metrics for the events an operator alarms on, as Embedded Metric Format log lines.

Each metric is written (flushed) at once with Powertools' `single_metric`: the mobile API runs under
Lambda Web Adapter, so there is no handler decorator at the end of an invocation to flush a batch.
"""

import os

from aws_lambda_powertools.metrics import MetricUnit, single_metric

DEFAULT_NAMESPACE = "OnboardingMemory"


def count_metric(name: str) -> None:
    """Add 1 to the metric `name` (a CloudWatch metric in the configured namespace)."""
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
    service = os.environ.get("POWERTOOLS_SERVICE_NAME") or "onboarding-memory"
    with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=namespace) as metric:
        metric.add_dimension(name="service", value=service)

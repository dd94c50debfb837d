"""What runs beside the local stack's servers and feeds the functions, as Lambda's event source
mappings and API Gateway do: the recall indexer fed from the table's stream, and on request the
local gateway (the template's API routes) and the SQS poller."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from infra.local.deployment import LocalDeployment
from infra.local.stack_template import TABLE_LOGICAL_ID

# Imported when a stack starts, not with this module (`python -m infra.local_stack` checks its
# ports within a second).
if TYPE_CHECKING:
    from infra.local.gateway import LocalGateway
    from infra.local.queue_poller import QueuePoller
    from infra.local.streams import StreamPoller


class StackPollers:
    def __init__(self) -> None:
        self.gateway: LocalGateway | None = None
        self.queue_pollers: list[QueuePoller] = []
        self.stream_pollers: list[StreamPoller] = []

    def start_indexing(self, table_description: dict[str, Any], region: str) -> None:
        """The template's stream subscriptions (the recall indexer), from the stream's end (LATEST)."""
        from infra.local.streams import StreamPoller, stream_subscriptions

        stream_arn = table_description["Table"].get("LatestStreamArn")
        if stream_arn is None:
            return
        self.stream_pollers = [
            StreamPoller(logical_id, stream_arn, region, properties).start()
            for logical_id, properties in stream_subscriptions(TABLE_LOGICAL_ID)
        ]

    def start_gateway(
        self,
        host: str,
        port: int,
        wrap: Callable[[Any], Any] | None,
        deployment: LocalDeployment,
        sms_queue_url: str,
    ) -> None:
        """The API routes, with the template's WAF rules, and the SMS queue's subscribers polled."""
        from infra.local.gateway import LocalGateway
        from infra.local.queue_poller import QueuePoller, queue_subscribers
        from infra.local.waf import local_waf

        self.gateway = LocalGateway(host, port, wrap, local_waf(deployment)).start()
        self.queue_pollers = [
            QueuePoller(logical_id, sms_queue_url).start() for logical_id in queue_subscribers("SmsQueue")
        ]

    def drain_index(self, timeout_s: float) -> None:
        for stream_poller in self.stream_pollers:
            stream_poller.drain(timeout_s)

    def stop(self) -> None:
        for poller in self.queue_pollers:
            poller.stop()
        for stream_poller in self.stream_pollers:
            stream_poller.stop()
        if self.gateway is not None:
            self.gateway.stop()

"""DescribeCluster (key 60): the live brokers, the cluster ID, and the controller.

Brokers and the controller come from the broker's MetadataCache, as Kafka's
ZooKeeper-mode brokers answer from theirs: every live broker with its
advertised host and port and its rack (``broker.rack``, or null), by node
id, never fenced (v2; there is no fencing here, so ``include_fenced_brokers``
changes nothing); the controller is the one the cluster elected, -1 while
there is none, and a broker alone is its own controller. From v1 a client
names the endpoint type it wants: brokers (1) are served; controllers (2)
get MISMATCHED_ENDPOINT_TYPE and any other type UNSUPPORTED_ENDPOINT_TYPE,
with Kafka's messages (a broker listener answers so in Kafka too). When the
client asks for the cluster's authorized operations it gets the principal's
(security/operations.py: 0 without DESCRIBE on the cluster; every operation
Kafka defines on a cluster without an authorizer); otherwise the field is
Kafka's "not asked" value, INT32_MIN.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import AUTHORIZED_OPERATIONS_UNKNOWN, NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import CLUSTER_NAME, ResourceType

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2


def _endpoint_error(endpoint_type: int) -> tuple[ErrorCode, str | None]:
    if endpoint_type == BROKER_ENDPOINT:
        return ErrorCode.none, None
    if endpoint_type == CONTROLLER_ENDPOINT:
        return (
            ErrorCode.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        )
    return ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {endpoint_type}"


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(60, ctx.version).response_module
    error, message = _endpoint_error(getattr(request, "endpoint_type", BROKER_ENDPOINT))
    if error != ErrorCode.none:
        return build(
            module.DescribeClusterResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            endpoint_type=BROKER_ENDPOINT,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_UNKNOWN,
        )
    return build(
        module.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id,
        brokers=tuple(
            build(
                module.DescribeClusterBroker,
                broker_id=b.node_id,
                host=e[0],
                port=e[1],
                rack=b.rack,
                is_fenced=False,
            )
            for b in broker.metadata.brokers()
            if (e := b.for_listener(ctx.connection.listener_name)) is not None
        ),
        cluster_authorized_operations=(
            (
                operations.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
                if operations.allowed_cluster(ctx, "operations")
                else 0
            )
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_UNKNOWN
        ),
    )


API = Api(key=60, name="DescribeCluster", min_version=0, max_version=2, handle=handle)

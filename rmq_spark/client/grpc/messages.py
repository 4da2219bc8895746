"""The client's ``OutgoingMessage``s as v2 ``Message``s, with the conventions of proto/README.md. Pulled v2 messages
are read by the native gatherer (``client.gathering``)."""

from __future__ import annotations

from collections.abc import Iterable

from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.model import MessageType, OutgoingMessage

# The user property in which a v2 message carries the message's flag (proto/README.md).
FLAG_PROPERTY = "__rmq_spark_flag"
# the v2 API's message types, by the client's
V2_MESSAGE_TYPES = {
    MessageType.NORMAL: pb.NORMAL,
    MessageType.FIFO: pb.FIFO,
    MessageType.DELAY: pb.DELAY,
    MessageType.TRANSACTION: pb.TRANSACTION,
}


def to_v2(topic: str, queue_id: int, messages: Iterable[OutgoingMessage]) -> list[pb.Message]:
    """Messages to send to ``topic`` queue ``queue_id``; each must already carry its UNIQ_KEY."""
    out = []
    for m in messages:
        props = dict(m.properties)
        if m.flag:
            props[FLAG_PROPERTY] = str(m.flag)
        sp = pb.SystemProperties(
            keys=list(m.keys),
            message_id=m.unique_id or "",
            queue_id=queue_id,
            body_encoding=pb.IDENTITY,
            message_type=V2_MESSAGE_TYPES[m.message_type],
        )
        if m.tags:
            sp.tag = m.tags
        if m.deliver_time_ms is not None:
            sp.delivery_timestamp.FromMilliseconds(m.deliver_time_ms)
        if m.sharding_key is not None:
            sp.message_group = m.sharding_key
        out.append(
            pb.Message(topic=pb.Resource(name=topic), user_properties=props, system_properties=sp, body=bytes(m.body))
        )
    return out

"""The client's ``OutgoingMessage``s as v2 ``Message``s, with the conventions of proto/README.md. Pulled v2 messages
are read by the native gatherer (``client.gathering``)."""
from __future__ import annotations

from typing import Iterable

from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.model import OutgoingMessage

# The user property in which a v2 message carries the message's flag (proto/README.md).
FLAG_PROPERTY = "__rmq_spark_flag"


def to_v2(topic: str, queue_id: int, messages: Iterable[OutgoingMessage]) -> list[pb.Message]:
    """Messages to send to ``topic`` queue ``queue_id``; each must already carry its UNIQ_KEY."""
    out = []
    for m in messages:
        props = dict(m.properties)
        if m.flag:
            props[FLAG_PROPERTY] = str(m.flag)
        sp = pb.SystemProperties(keys=list(m.keys), message_id=m.unique_id or "", queue_id=queue_id,
                                 body_encoding=pb.IDENTITY, message_type=pb.NORMAL)
        if m.tags:
            sp.tag = m.tags
        out.append(pb.Message(topic=pb.Resource(name=topic), user_properties=props, system_properties=sp,
                              body=bytes(m.body)))
    return out

"""v2 ``Message`` <-> the client's ``Message`` / ``OutgoingMessage``, with the conventions of proto/README.md. This
is the reference reading of pulled messages: the executor gathers a pull's answer frames natively
(``BlockGatherer.add_v2``, tested against ``decode_frames``)."""
from __future__ import annotations

from typing import Iterable, Sequence

from rmq_spark.client import compression
from rmq_spark.client.compression import DEFAULT_MAX_MESSAGE_BYTES, MessageTooLargeError
from rmq_spark.client.errors import ProtocolError
from rmq_spark.client.grpc.v2 import definition_pb2 as pb
from rmq_spark.client.grpc.v2 import service_pb2 as svc
from rmq_spark.client.model import Message, MessageQueue, MessageType
from rmq_spark.client.model import OutgoingMessage

FLAG_PROPERTY = "__rmq_spark_flag"
# the v2 API's message types, by the client's
V2_MESSAGE_TYPES = {MessageType.NORMAL: pb.NORMAL, MessageType.FIFO: pb.FIFO, MessageType.DELAY: pb.DELAY,
                    MessageType.TRANSACTION: pb.TRANSACTION}


def from_v2(m: pb.Message, mq: MessageQueue, max_body: int = DEFAULT_MAX_MESSAGE_BYTES) -> Message:
    """One pulled v2 message as the client's Message of queue ``mq``; a GZIP body may expand to ``max_body``."""
    sp = m.system_properties
    props = dict(m.user_properties)
    flag = props.pop(FLAG_PROPERTY, None)
    body = m.body
    if sp.body_encoding == pb.GZIP:
        try:
            body = compression.decompress(compression.GZIP, body, max_body)
        except MessageTooLargeError as e:
            raise MessageTooLargeError(f"{mq} offset {sp.queue_offset}: {e}; the limit is option maxMessageBytes",
                                       limit=e.limit) from None
        except ProtocolError as e:
            raise ProtocolError(f"{mq}: the gzip body of message {sp.message_id} does not decompress: {e}") from None
    try:
        flag_value = int(flag) if flag is not None else 0
    except ValueError:
        raise ProtocolError(f"{mq}: message {sp.message_id} has a non-integer {FLAG_PROPERTY} {flag!r}") from None
    keys = tuple(sp.keys)
    if "" in keys:
        keys = tuple(k for k in keys if k)
    born, stored = sp.born_timestamp, sp.store_timestamp
    return Message(
        topic=m.topic.name or mq.topic, broker_name=mq.broker_name, queue_id=sp.queue_id,
        queue_offset=sp.queue_offset, msg_id=sp.message_id, tags=sp.tag if sp.HasField("tag") else None,
        keys=keys, body=body, born_timestamp=born.seconds * 1000 + born.nanos // 1_000_000,
        store_timestamp=stored.seconds * 1000 + stored.nanos // 1_000_000, born_host=sp.born_host,
        store_host=sp.store_host,
        reconsume_times=max(sp.delivery_attempt - 1, 0) if sp.HasField("delivery_attempt") else 0,
        flag=flag_value, properties=props)


def decode_frames(frames: Sequence[bytes], mq: MessageQueue, tags: frozenset[str] | None = None,
                  max_body: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[Message]:
    """The messages of a pull's answer frames (serialized ``PullMessageResponse``s that each hold a message) whose
    tag is in ``tags`` (None: every message). ProtocolError for a frame that protobuf cannot read."""
    out = []
    for frame in frames:
        try:
            answer = svc.PullMessageResponse.FromString(frame)
        except Exception as e:  # protobuf's DecodeError (its class differs between implementations)
            raise ProtocolError(f"{mq}: a PullMessage answer frame of {len(frame)} bytes does not parse: {e}") from None
        if answer.WhichOneof("content") != "message":
            raise ProtocolError(f"{mq}: a PullMessage answer frame holds no message")
        m = from_v2(answer.message, mq, max_body)
        if tags is None or (m.tags is not None and m.tags in tags):
            out.append(m)
    return out


def to_v2(topic: str, queue_id: int, messages: Iterable[OutgoingMessage]) -> list[pb.Message]:
    """Messages to send to ``topic`` queue ``queue_id``; each must already carry its UNIQ_KEY."""
    out = []
    for m in messages:
        props = dict(m.properties)
        if m.flag:
            props[FLAG_PROPERTY] = str(m.flag)
        sp = pb.SystemProperties(keys=list(m.keys), message_id=m.unique_id or "", queue_id=queue_id,
                                 body_encoding=pb.IDENTITY, message_type=V2_MESSAGE_TYPES[m.message_type])
        if m.tags:
            sp.tag = m.tags
        if m.deliver_time_ms is not None:
            sp.delivery_timestamp.FromMilliseconds(m.deliver_time_ms)
        if m.sharding_key is not None:
            sp.message_group = m.sharding_key
        out.append(pb.Message(topic=pb.Resource(name=topic), user_properties=props, system_properties=sp,
                              body=bytes(m.body)))
    return out

"""partition_reader.read_ranges over a scripted broker that answers pulls with real message blocks (plain, compressed
and inner batches), through both pull drivers: the rows of the per-message path, in batches of at most
rowsPerBatch rows."""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest

import rmq_spark.source.partition_reader as partition_reader
from rmq_spark.client.errors import MessageTooLargeError, ProtocolError
from rmq_spark.client.model import EVERY_MESSAGE, FilterExpression, MessageQueue, PullResult
from rmq_spark.client.namespaces import NO_NAMESPACE
from rmq_spark.client.range_reader import SharedPulls
from rmq_spark.client.remoting.client import RemotingClient
from rmq_spark.compiled import BlockGatherer, PullStatus, RangeCursor
from rmq_spark.options import parse_options
from rmq_spark.source.offsets import QueueRange
from rmq_spark.source.schema import ARROW_SCHEMA
from tests.support.calls import Done
from tests.support.reference_codec import decode_messages, to_record_batch
from tests.support.scripted_remoting import ScriptedRemoting
from tests.support.stored_messages import (
    COMPRESSED,
    COMPRESSION_BITS,
    INNER_BATCH,
    NEED_UNWRAP,
    encode_batch_record,
    encode_stored_message,
)

MQ = MessageQueue("T", "broker-a", 1)


class ScriptedBroker:
    """One queue of stored records (one per offset); a pull scans at most 32 offsets, skips the records whose tag
    does not match (as the broker's tag-hash filter does) and returns at most max_nums of them, and no more than
    256 KiB unless a single record is larger (the broker's limit per pull from memory)."""

    namespace = NO_NAMESPACE

    def __init__(self, records: list[bytes], tags: list[str]):
        self.records, self.tags = records, tags

    def pull_session(self, mq, **kw):
        return SharedPulls(self, mq, **kw)

    def pull_async(self, mq, offset, max_nums=32, *, group, expression=EVERY_MESSAGE, suspend_ms=0):
        high = len(self.records)
        if offset >= high:
            return Done(PullResult(PullStatus.NO_NEW_MSG, offset, 0, high))
        wanted = expression.tags
        found, o = [], offset
        size = 0
        while o < high and o - offset < 32 and len(found) < max_nums:
            if wanted is None or self.tags[o] in wanted:
                if found and size + len(self.records[o]) > 256 << 10:
                    break
                found.append(self.records[o])
                size += len(self.records[o])
            o += 1
        if not found:
            return Done(PullResult(PullStatus.NO_MATCHED_MSG, o, 0, high))
        return Done(PullResult(PullStatus.FOUND, o, 0, high, body=b"".join(found)))


def _queue(n: int) -> ScriptedBroker:
    records, tags = [], []
    for i in range(n):
        tag = "ABC"[i % 3]
        if i % 50 == 7:  # a compressed record now and then
            rec = encode_stored_message(
                queue_id=1, queue_offset=i, body=b"z" * 300, compression="zlib", properties={"TAGS": tag}
            )
        elif i % 50 == 9:  # an inner batch of one message (queue offsets stay dense)
            rec = encode_stored_message(
                queue_id=1,
                queue_offset=i,
                sys_flag=INNER_BATCH | NEED_UNWRAP,
                body=encode_batch_record(f"in{i}".encode(), {"TAGS": tag}),
            )
        else:
            rec = encode_stored_message(
                queue_id=1,
                queue_offset=i,
                body=f"m{i}".encode(),
                properties={"TAGS": tag, "KEYS": f"k{i}", "UNIQ_KEY": f"U{i}"},
            )
        records.append(rec)
        tags.append(tag)
    return ScriptedBroker(records, tags)


@pytest.fixture(params=["python", "native"])
def serve(request, monkeypatch):
    """serve(broker) -> the nameServer option of a source that reads ``broker``: through the Python driver over
    the scripted broker's own calls, or through a RemotingClient's native pull loop over a scripted remoting peer
    that serves it."""
    peers = []

    def serve(broker: ScriptedBroker) -> str:
        if request.param == "python":
            monkeypatch.setattr(partition_reader, "shared_client", lambda options: contextlib.nullcontext(broker))
            return "127.0.0.1:9876"
        peers.append(ScriptedRemoting(broker, queues=MQ.queue_id + 1))
        return peers[-1].address

    yield serve
    for peer in peers:
        peer.close()


@pytest.mark.parametrize("rows_per_batch", [1, 7, 31, 32, 33, 100, 8192])
@pytest.mark.parametrize("expression", ["*", "A || C"])
def test_read_range_batches(serve, rows_per_batch, expression):
    broker = _queue(400)
    options = parse_options(
        {
            "nameServer": serve(broker),
            "topic": "T",
            "rowsPerBatch": str(rows_per_batch),
            "subExpression": expression,
            "pullDepth": "3",
        }
    )
    batches = list(partition_reader.read_ranges(options, [QueueRange(MQ, 5, 390)]))
    assert batches and all(0 < b.num_rows <= rows_per_batch for b in batches)
    assert all(b.schema == ARROW_SCHEMA for b in batches)
    got = pa.Table.from_batches(batches).combine_chunks()
    tags = FilterExpression(expression).tags
    want = to_record_batch(
        [m for r in broker.records for m in decode_messages(r, "broker-a", tags=tags) if 5 <= m.queue_offset < 390]
    )
    assert got.equals(pa.Table.from_batches([want]))


def test_read_range_flushes_large_blocks_early(serve, monkeypatch):
    broker = ScriptedBroker([encode_stored_message(queue_offset=i, body=bytes(1 << 20)) for i in range(40)], ["A"] * 40)
    monkeypatch.setattr(partition_reader, "MAX_PENDING_BYTES", 4 << 20)
    options = parse_options({"nameServer": serve(broker), "topic": "T"})
    batches = list(partition_reader.read_ranges(options, [QueueRange(MQ, 0, 40)]))
    assert sum(b.num_rows for b in batches) == 40 and len(batches) > 1


@pytest.mark.parametrize(
    "body, error, match",
    [
        (b"not zlib at all", ProtocolError, "T:broker-a/1 offset 9: .*zlib"),
        (None, MessageTooLargeError, "expands past 1024 bytes"),
    ],
)
def test_a_block_that_does_not_read_fails_the_read_naming_the_message(serve, body, error, match):
    """Through both drivers, the error of the gatherer, naming the message."""
    broker = _queue(20)
    if body is None:  # a small zlib body that expands past maxMessageBytes
        broker.records[9] = encode_stored_message(
            topic=MQ.topic, queue_id=1, queue_offset=9, body=b"z" * 4096, compression="zlib"
        )
    else:
        broker.records[9] = encode_stored_message(
            topic=MQ.topic, queue_id=1, queue_offset=9, body=body, sys_flag=COMPRESSED | COMPRESSION_BITS["zlib"]
        )
    options = parse_options({"nameServer": serve(broker), "topic": "T", "maxMessageBytes": "1024"})
    with pytest.raises(error, match=match):
        list(partition_reader.read_ranges(options, [QueueRange(MQ, 0, 20)]))


def test_the_native_pull_loop_raises_what_the_gatherer_cannot_read_itself():
    """It used to hand such an answer back as a Take step, for Python to decode a second time only to raise."""
    broker = _queue(20)
    broker.records[3] = encode_stored_message(
        topic=MQ.topic, queue_id=1, queue_offset=3, body=b"not zlib", sys_flag=COMPRESSED | COMPRESSION_BITS["zlib"]
    )
    with ScriptedRemoting(broker, queues=MQ.queue_id + 1) as peer, RemotingClient(peer.address) as client:
        session = client.pull_session(MQ, group="g")
        cursor = RangeCursor(
            MQ.topic,
            MQ.broker_name,
            0,
            20,
            depth=2,
            slot=32,
            filtered=False,
            sparse=False,
            fail_on_data_loss=True,
            retry_timeout=5.0,
        )
        with pytest.raises(ProtocolError, match="offset 3: .*zlib"):
            session.run(
                cursor, BlockGatherer(["queueOffset"], broker_name=MQ.broker_name, max_body=1 << 20), 1000, 1 << 20
            )

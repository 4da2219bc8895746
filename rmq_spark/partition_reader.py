"""Executor side: read one QueueRange exactly and yield Arrow batches of bounded size."""
from __future__ import annotations

import logging
from typing import Iterator

import pyarrow as pa

from rmq_spark.client.range_reader import RangeReader, tag_set
from rmq_spark.client.remoting.message_codec import decode_messages
from rmq_spark.connect import shared_client
from rmq_spark.offsets import QueueRange
from rmq_spark.options import SourceOptions
from rmq_spark.schema import to_record_batch

log = logging.getLogger(__name__)


def read_range(options: SourceOptions, qr: QueueRange) -> Iterator[pa.RecordBatch]:
    """Every message of ``qr`` that matches the options' filter, in queue order, as RecordBatches of at most
    ``rowsPerBatch`` rows (so memory stays flat however long the range is)."""
    if qr.size == 0:
        return
    client = shared_client(options)
    tags = tag_set(options.sub_expression) if options.expression_type == "TAG" else None
    reader = RangeReader(client, qr.queue, qr.start, qr.end, depth=options.pull_depth, group=options.pull_group,
                         expression=options.sub_expression, expression_type=options.expression_type,
                         fail_on_data_loss=options.fail_on_data_loss)
    limit = options.rows_per_batch
    pending = []
    for chunk in reader:
        for m in decode_messages(chunk.body, qr.queue.broker_name, tags=tags):
            if chunk.low <= m.queue_offset < chunk.high:
                pending.append(m)
        while len(pending) >= limit:
            yield to_record_batch(pending[:limit])
            pending = pending[limit:]
    if pending:
        yield to_record_batch(pending)
    if reader.lost:
        log.warning("%s: %d offsets of [%d, %d) were no longer on the broker and were skipped",
                    qr.queue, reader.lost, qr.start, qr.end)

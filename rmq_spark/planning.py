"""Driver-side planning shared by the batch and streaming readers: which queues, and which ranges to read."""
from __future__ import annotations

import logging
import re

from rmq_spark.client.errors import DataLossError, TopicNotFoundError
from rmq_spark.client.model import MessageQueue
from rmq_spark.offsets import QueueRange
from rmq_spark.options import OptionError, SourceOptions

log = logging.getLogger(__name__)


def resolve_queues(client, options: SourceOptions) -> list[MessageQueue]:
    """Every readable queue of the topics the options name (or that match topicPattern), sorted."""
    if options.topic_pattern is not None:
        pattern = re.compile(options.topic_pattern)
        topics = [t for t in client.topics() if pattern.fullmatch(t)]
        if not topics:
            return []
    else:
        topics = list(options.topics)
    queues: list[MessageQueue] = []
    for topic in topics:
        try:
            found = client.queues(topic, refresh=True)
        except TopicNotFoundError as e:
            where = f"name server {options.name_server}" if options.name_server else f"endpoint {options.endpoint}"
            raise TopicNotFoundError(f"topic {topic!r} does not exist on {where}: "
                                     "check the topic option, or create the topic", code=e.code,
                                     remark=e.remark) from None
        if not found and options.topic_pattern is None:
            raise OptionError(f"topic {topic!r} has no readable queue (its permission forbids reads)")
        queues.extend(found)
    return sorted(queues)


def check_data_loss(queue: MessageQueue, requested: int, available: int, fail: bool) -> int:
    """The start to use for a queue whose first held offset is ``available``: ``requested`` when still held,
    else ``available`` under failOnDataLoss=false, else DataLossError naming all three."""
    if requested >= available:
        return requested
    message = (f"{queue}: offset {requested} was requested but the broker's first available offset is "
               f"{available}; messages [{requested}, {available}) were deleted before they were read")
    if fail:
        raise DataLossError(message + ". Set failOnDataLoss=false to start at the first available offset.")
    log.warning("%s; starting at %d (failOnDataLoss=false)", message, available)
    return available


def plan_ranges(queues: list[MessageQueue], starts: dict[MessageQueue, int], ends: dict[MessageQueue, int],
                mins: dict[MessageQueue, int], options: SourceOptions) -> list[QueueRange]:
    """One range per queue, starts checked for data loss, ends checked against starts."""
    ranges = []
    for mq in queues:
        start = check_data_loss(mq, starts[mq], mins[mq], options.fail_on_data_loss)
        end = ends[mq]
        if end < starts[mq]:
            raise OptionError(f"{mq}: the end offset {end} is before the start offset {starts[mq]}; check the "
                              "starting and ending options")
        ranges.append(QueueRange(mq, start, max(start, end)))
    return ranges
